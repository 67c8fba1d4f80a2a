"""The checks of `picobot doctor` over a loaded config, for the CLI
(gateway/cli/doctor) and the console's Configuration view alike.

`offline_findings` is every check that needs no network beyond the storage
server: the config (job targets, the file's mode, unset `${VAR}`
placeholders), the database (a SQLite file: schema version, integrity; a
PostgreSQL server: reachable within a short timeout, its version, the schema
version), the data, storage, workspace and media directories (writable, by
really creating a file), each enabled channel's credentials and access
settings, the host names served, the bash sandbox and each used provider's
api_key. It blocks (files, the database): run it in a thread.
`gateway.ops.doctor.probe` calls the providers and channels.

Never changes anything: the database is opened read-only (never created or
migrated) and no secret is ever in a finding (a storage.url shows its
password as ***).
"""

from __future__ import annotations

import json
import stat
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from agent.tools.sandbox import bwrap_path
from channels.base import ChannelSettings
from gateway.config.core import ConfigError
from gateway.config.loading import LoadedConfig
from gateway.ops.doctor.findings import Finding, ok, problem, secret_of, warn
from gateway.ops.doctor.probe import DEFAULT_BASE, used_providers
from gateway.ops.hardening import BWRAP_INSTALL_HINT
from storage.sqlite.health import UnreadableDatabase, inspect_database
from storage.sqlite.migrations import MIGRATIONS

__all__ = ["check_dirs", "offline_findings"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_SERVER_TIMEOUT_SECS = 5.0  # connecting to the storage.url server
_UNREACHABLE_HINT = (
    "start the server, or check host, port, user, password and database in storage.url; "
    "the role and a database it owns must exist (docs/storage.md)"
)


def offline_findings(loaded: LoadedConfig) -> list[Finding]:
    """Every check but the probes, in the order `picobot doctor` prints them.
    Blocking: run it in a thread."""
    dirs = [("data dir", loaded.home)]
    if loaded.sqlite_path is not None:  # a PostgreSQL server keeps no folder here
        dirs.append(("storage dir", loaded.sqlite_path.parent))
    dirs += [("workspace", loaded.workspace), ("media dir", loaded.media_dir)]
    return [
        *_config_findings(loaded),
        *_storage_findings(loaded),
        *check_dirs(dirs),
        *_channel_findings(loaded),
        *_access_findings(loaded),
        *_host_findings(loaded),
        *_sandbox_findings(loaded),
        *_provider_findings(loaded),
    ]


# -- config ------------------------------------------------------------------
def _config_findings(loaded: LoadedConfig) -> list[Finding]:
    findings: list[Finding] = []
    path = loaded.path
    try:  # as start-up checks it, with the channels the config enables
        loaded.check_job_targets(loaded.config.channels.enabled())
    except ConfigError as exc:
        findings.append(problem("config", str(exc), "fix the file; every key is in docs/CONFIG.md"))
    if path is None:
        message = "no file at $PICOBOT_HOME/config.json or ./config.json; built-in defaults"
        findings.append(warn("config", message, "picobot init"))
    else:
        if not findings:
            findings.append(ok("config", f"{path} is valid"))
        try:  # a running gateway's file may have gone since it was loaded
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError as exc:
            mode = 0
            findings.append(warn("config", f"{path} cannot be read now: {exc.strerror}"))
        if mode & 0o007:  # group-readable is the service layout (root:picobot 0640)
            message = f"{path} has mode {mode:04o}: every user can read it"
            findings.append(warn("config", message, f"chmod 640 {path}"))
    for where, var in sorted(loaded.missing_env_in_use.items()):
        if where.startswith("providers.") and where.endswith(".api_key"):
            continue  # the provider check says it
        message = f"{where} refers to ${{{var}}}, which is not set"
        fix = f"export {var}=… (for the service: put it in /etc/picobot/env)"
        findings.append(problem("config", message, fix))
    return findings


# -- storage and directories ---------------------------------------------------
def _storage_findings(loaded: LoadedConfig) -> list[Finding]:
    if loaded.sqlite_path is not None:
        return _check_storage(loaded.sqlite_path)
    return _check_server(loaded.storage_url)


def _check_server(url: str) -> list[Finding]:
    """The PostgreSQL server `storage.url` names: reachable, new enough, and
    a schema this picobot can use. Every line names the URL password-masked."""
    from storage.postgres.health import ServerUnreachable, inspect_server  # psycopg: only here

    try:
        health = inspect_server(url, timeout_secs=_SERVER_TIMEOUT_SECS)
    except ServerUnreachable as exc:
        return [problem("storage", str(exc), _UNREACHABLE_HINT)]
    where, server = health.where, f"PostgreSQL {health.server_version_text}"
    if health.too_old:
        message = f"{where}: {server} is too old; picobot needs PostgreSQL 14 or newer"
        return [problem("storage", message, "upgrade the server (docs/storage.md)")]
    if health.wrong_encoding:
        message = f"{where}: the database's encoding is {health.encoding}; picobot needs UTF8"
        fix = "create the database with ENCODING 'UTF8' and point storage.url at it"
        return [problem("storage", message, f"{fix} (docs/storage.md)")]
    version, latest = health.schema_version, health.latest_schema
    findings: list[Finding] = []
    if version > latest:
        message = f"{where}: schema version {version} is newer than this picobot knows ({latest})"
        fix = "upgrade picobot, or point storage.url at another database"
        findings.append(problem("storage", message, fix))
    elif version == 0:
        message = f"{where}: {server}; empty; picobot creates the schema at first start"
        findings.append(ok("storage", message))
    else:
        pending = latest - version
        note = f"; {pending} migration(s) will run at next start" if pending else ""
        findings.append(ok("storage", f"{where}: {server}, schema version {version}{note}"))
    if health.failed_outbox:
        message = (
            f"{health.failed_outbox} message(s) could not be delivered (outbox state 'failed')"
        )
        findings.append(warn("outbox", message))
    return findings


def _check_storage(path: Path) -> list[Finding]:
    if not path.exists():
        return [ok("storage", f"{path} does not exist yet; it is created at first start")]
    latest, restore = len(MIGRATIONS), "stop the gateway, restore a backup (docs/OPERATIONS.md)"
    try:
        health = inspect_database(path)
    except UnreadableDatabase as exc:
        return [problem("storage", f"{path} cannot be read as SQLite: {exc}", restore)]
    version, integrity, failed = health.schema_version, health.integrity, health.failed_outbox
    findings: list[Finding] = []
    if version > latest:
        message = f"schema version {version} is newer than this picobot knows ({latest})"
        findings.append(problem("storage", message, "upgrade picobot, or " + restore))
    elif integrity != ["ok"]:
        message = "integrity_check failed: " + "; ".join(integrity[:3])
        findings.append(problem("storage", message, restore))
    else:
        pending = latest - version
        note = f"; {pending} migration(s) will run at next start" if pending else ""
        findings.append(ok("storage", f"{path}: schema version {version}, integrity ok{note}"))
    if failed:
        message = f"{failed} message(s) could not be delivered (outbox state 'failed')"
        findings.append(warn("outbox", message))
    return findings


def check_dirs(dirs: list[tuple[str, Path]]) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[Path] = set()
    for label, path in dirs:
        if path in seen:
            continue
        seen.add(path)
        findings.append(_check_dir(label, path))
    return findings


def _check_dir(label: str, path: Path) -> Finding:
    fix = f"create it and give the service user write access (chown picobot: {path})"
    if path.exists() and not path.is_dir():
        return problem(label, f"{path} exists but is not a directory", f"move {path} away")
    target, suffix = path, ""
    if not path.exists():
        target = next(p for p in path.parents if p.exists())
        if not target.is_dir():
            return problem(label, f"{path} cannot be created: {target} is a file", fix)
        suffix = " (does not exist yet; it will be created at start)"
    try:  # as root, permission bits say nothing: really try
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as exc:
        where = "is not writable" if target == path else f"cannot be created in {target}"
        return problem(label, f"{path} {where}: {exc.strerror}", fix)
    return ok(label, f"{path} is writable{suffix}")


# -- credentials ---------------------------------------------------------------
def _channel_findings(loaded: LoadedConfig) -> list[Finding]:
    findings: list[Finding] = []
    env_fix = 'set channels.{c}.{k} to a placeholder like "${{{e}}}" and export {e}'
    for name, section in loaded.config.channels.enabled().items():
        check = f"channel {name}"
        if name == "telegram":
            token = secret_of(getattr(section, "token", ""))
            if not token:
                fix = env_fix.format(c=name, k="token", e="TELEGRAM_BOT_TOKEN")
                findings.append(problem(check, "token is empty", fix))
            elif ":" not in token:
                findings.append(warn(check, "token does not look like a bot token (123:ABC…)"))
            else:
                findings.append(ok(check, "token present"))
        elif name == "feishu":
            missing = [
                k for k in ("app_id", "app_secret") if not secret_of(getattr(section, k, ""))
            ]
            if missing:
                fix = env_fix.format(c=name, k=missing[0], e=f"FEISHU_{missing[0].upper()}")
                findings.append(problem(check, f"{' and '.join(missing)} empty", fix))
            else:
                findings.append(ok(check, "app_id and app_secret present"))
            if getattr(section, "mode", None) == "webhook" and not (
                secret_of(getattr(section, "encrypt_key", None))
                or secret_of(getattr(section, "verification_token", None))
            ):
                message = "webhook without encrypt_key or verification_token: forged events pass"
                fix = "set channels.feishu.encrypt_key (and verification_token) as in the console"
                findings.append(problem(check, message, fix))
        elif name == "wechat":
            findings.append(_wechat_credentials(loaded, section))
        elif name == "wecom_kf":
            # Loading the config already refused an enabled section without them.
            findings.append(ok(check, "corp_id, secret, token and encoding_aes_key present"))
        else:
            findings.append(ok(check, "enabled"))
    return findings


def _access_findings(loaded: LoadedConfig) -> list[Finding]:
    """Settings that lock everyone out, or leave codes nobody in a chat can approve."""
    if loaded.admins:
        return []
    findings: list[Finding] = []
    fix = 'add your id to gateway.admins, e.g. ["telegram:123456789"] (/whoami tells it)'
    for name, section in loaded.config.channels.enabled().items():
        if section.pairing:
            message = (
                f"channels.{name}.pairing is on but no admin is named: pairing codes can "
                "be approved only on the host (picobot pairing approve CODE)"
            )
            findings.append(warn("access", message, fix))
        elif not section.allow_from:
            message = (
                f"channels.{name}.allow_from is [] with no admin and no pairing: nobody is let in"
            )
            findings.append(warn("access", message, fix))
    return findings


def _host_findings(loaded: LoadedConfig) -> list[Finding]:
    """Names the HTTP server will answer 421 to (docs/OPERATIONS.md, "Host
    names and origins"): a wildcard bind reached by a LAN address or a public
    name, webhooks a platform calls by a name nobody listed."""
    config = loaded.config
    if config.served_hosts.public:
        return []
    fix = (
        "list the names and addresses clients use in gateway.public_hosts "
        "(docs/OPERATIONS.md#host-names-and-origins)"
    )
    findings: list[Finding] = []
    if config.gateway.host in ("0.0.0.0", "::", "[::]"):
        message = (
            f'gateway.host is "{config.gateway.host}" and no public host name is served: '
            "a request by any name but a loopback one (a LAN address, a public name) gets 421"
        )
        findings.append(warn("http", message, fix))
    channels = config.channels
    hooks = [
        name
        for name, on in (("feishu", channels.feishu.mode == "webhook"), ("wecom_kf", True))
        if on and name in channels.enabled()
    ]
    for name in hooks:
        message = (
            f"channels.{name} takes webhooks but no public host name is served: the "
            "platform's callbacks get 421 unless a proxy rewrites Host to a loopback name"
        )
        findings.append(warn("http", message, fix))
    return findings


def _sandbox_findings(loaded: LoadedConfig) -> list[Finding]:
    mode = loaded.config.tools.bash.sandbox
    if mode == "off":
        return [warn("bash sandbox", 'tools.bash.sandbox is "off": bash runs unsandboxed')]
    if "bash" in loaded.config.tools.disabled:
        return [ok("bash sandbox", "the bash tool is disabled")]
    if bwrap_path() is None:
        message = "bwrap not found: the bash tool runs unsandboxed"
        if mode == "bwrap":
            return [
                problem(
                    "bash sandbox",
                    message + ' (and sandbox "bwrap" refuses to start)',
                    BWRAP_INSTALL_HINT,
                )
            ]
        return [warn("bash sandbox", message, BWRAP_INSTALL_HINT)]
    return [ok("bash sandbox", f"bubblewrap at {bwrap_path()}")]


def _wechat_credentials(loaded: LoadedConfig, section: ChannelSettings) -> Finding:
    explicit = getattr(section, "cred_path", None)  # the channel's default location otherwise
    path = Path(explicit).expanduser() if explicit else loaded.home / "wechat" / "credentials.json"
    login = "picobot channels login wechat"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return problem("channel wechat", f"not logged in: {path} does not exist", login)
    except (OSError, ValueError) as exc:
        return problem("channel wechat", f"{path} is unreadable: {exc}", login)
    if not isinstance(raw, dict) or not raw.get("bot_token"):
        return problem("channel wechat", f"{path} holds no bot token", login)
    if raw.get("expired"):
        return problem("channel wechat", "the login has expired (iLink said ret -14)", login)
    return ok("channel wechat", f"credentials present in {path}")


def _is_loopback(url: str | None) -> bool:
    return bool(url) and urlsplit(url or "").hostname in _LOOPBACK


def _provider_findings(loaded: LoadedConfig) -> list[Finding]:
    findings: list[Finding] = []
    for name in used_providers(loaded):
        p = loaded.config.providers[name]
        check = f"provider {name}"
        where = p.base_url or DEFAULT_BASE[p.type]
        if p.api_key.get_secret_value():
            findings.append(ok(check, f"{p.type} at {where}, api_key present"))
        elif _is_loopback(p.base_url):
            findings.append(ok(check, f"{p.type} at {where}, no api_key (a local server)"))
        elif var := loaded.missing_env.get(f"providers.{name}.api_key"):
            # a warning: the gateway starts, and doctor often runs without the
            # service's environment; every turn fails until the variable is set
            message = f"api_key is empty: ${{{var}}} is not set; every turn fails until it is"
            fix = f"export {var}=… (for the service: put it in /etc/picobot/env)"
            findings.append(warn(check, message, fix))
        else:
            var = "ANTHROPIC_API_KEY" if p.type == "anthropic" else "OPENAI_API_KEY"
            fix = f'set providers.{name}.api_key to "${{{var}}}" and export {var}'
            findings.append(problem(check, "api_key is empty", fix))
    return findings
