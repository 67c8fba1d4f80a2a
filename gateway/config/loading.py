"""Loading the configuration: the file found (`--config`, $PICOBOT_HOME,
./config.json), its JSON read, `${ENV}` placeholders substituted, the result
validated into `Config` (gateway.config.core), and `LoadedConfig`: the config
with where it came from and the paths derived from it (home, storage,
workspace, media). Errors are `ConfigError` with the JSON path of the key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.mcp.config import unset_placeholders
from gateway.config.agents import AgentConfig
from gateway.config.core import RETIRED_KEY, Config, ConfigError, admins_from_env
from storage.url import is_postgres_url, sqlite_path_of

__all__ = [
    "LoadedConfig",
    "find_config_file",
    "load_config",
    "parse_config",
    "picobot_home",
    "unset_placeholders_in_use",
]


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: Config
    path: Path | None  # None: built-in defaults, no file found
    home: Path
    # JSON path → environment variable named by a placeholder that was unset.
    missing_env: Mapping[str, str]
    env_admins: tuple[str, ...] = ()  # from PICOBOT_ADMINS
    static_dir: Path | None = None  # $STATIC_DIR: serve the web UI from disk (development)
    # the environment's OTEL_* variables (tracing: gateway.ops.tracing)
    otel_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def missing_env_in_use(self) -> dict[str, str]:
        """The unset placeholders that matter: not those of a disabled channel,
        an inactive MCP server or a provider no agent uses."""
        config = self.config
        return _in_use(
            self.missing_env,
            channels=set(config.channels.enabled()),
            servers={key for key, server in config.mcp_servers.items() if server.is_active},
            providers={agent.provider for agent in config.agents.values()},
        )

    def check_job_targets(self, channels: Collection[str]) -> None:
        """ConfigError, as the loading would raise it, when a configured job
        names a channel not among `channels`: start-up passes the channels it
        runs, `picobot doctor` the enabled ones (Config.job_target_problems)."""
        problems = self.config.job_target_problems(channels)
        if problems:
            raise _invalid(str(self.path) if self.path else "default config", problems)

    @property
    def admins(self) -> frozenset[str]:
        """gateway.admins and PICOBOT_ADMINS together."""
        return frozenset((*self.config.gateway.admins, *self.env_admins))

    @property
    def storage_url(self) -> str:
        """What `storage.backends.open_database` opens: `storage.url`, else the
        SQLite file (`storage.path` or the default) as `sqlite:///…`. It may
        hold a password: show it only through `storage.url.redact_url`."""
        url = self.config.storage.url
        if url and self.storage_is_postgres:
            return url
        path = self.sqlite_path
        assert path is not None  # not PostgreSQL: a file
        return f"sqlite:///{path}"

    @property
    def storage_is_postgres(self) -> bool:
        url = self.config.storage.url
        return bool(url) and is_postgres_url(url or "")

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file, None when storage is on a PostgreSQL server."""
        storage = self.config.storage
        if storage.url:
            if self.storage_is_postgres:
                return None
            return Path(sqlite_path_of(storage.url)).expanduser()
        if storage.path:
            return Path(storage.path).expanduser()
        return self.home / "storage" / "sessions.db"

    @property
    def storage_path(self) -> Path:
        """The SQLite file. Code that serves both backends uses `storage_url`
        (or `sqlite_path`); with a PostgreSQL `storage.url` there is no file,
        and this raises ConfigError rather than name one that is not used."""
        path = self.sqlite_path
        if path is None:
            raise ConfigError(
                "storage.url names a PostgreSQL server: there is no SQLite file "
                "(this command works on SQLite only; docs/storage.md)"
            )
        return path

    @property
    def skills_project_dir(self) -> Path:
        """<project> of the project skill sources (docs/skills.md)."""
        chosen = self.config.skills.project_dir
        return Path(chosen).expanduser() if chosen else self.workspace

    @property
    def workspace(self) -> Path:
        ws = self.config.tools.workspace
        return Path(ws).expanduser() if ws else self.home / "workspace"

    @property
    def agent_dir(self) -> Path:
        return self.home / "agent"

    @property
    def media_dir(self) -> Path:
        return self.home / "media"


def picobot_home(environ: Mapping[str, str]) -> Path:
    home = environ.get("PICOBOT_HOME")
    return Path(home).expanduser() if home else Path.home() / ".picobot"


def find_config_file(
    explicit: str | Path | None, environ: Mapping[str, str], cwd: Path
) -> Path | None:
    """`--config`, else $PICOBOT_HOME/config.json, else ./config.json, else None."""
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        return path
    for candidate in (picobot_home(environ) / "config.json", cwd / "config.json"):
        if candidate.is_file():
            return candidate
    return None


_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|<([A-Z_][A-Z0-9_]*)>")


def _substitute(node: Any, environ: Mapping[str, str], path: str, missing: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {
            k: _substitute(v, environ, f"{path}.{k}" if path else k, missing)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_substitute(v, environ, f"{path}[{i}]", missing) for i, v in enumerate(node)]
    if not isinstance(node, str):
        return node

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        value = environ.get(name)
        if value:
            return value
        if default is not None:
            return default
        missing[path] = name
        return ""

    return _PLACEHOLDER.sub(replace, node)


def _in_use(
    missing: Mapping[str, str], *, channels: set[str], servers: set[str], providers: set[str]
) -> dict[str, str]:
    in_use = {"channels": channels, "mcpServers": servers, "providers": providers}
    kept: dict[str, str] = {}
    for where, var in missing.items():
        section, _, rest = where.partition(".")
        if section in in_use and rest.split(".", 1)[0] not in in_use[section]:
            continue
        kept[where] = var
    return kept


def unset_placeholders_in_use(raw: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """For a config that did not load: its unset placeholders that would matter,
    judged from the raw JSON as `LoadedConfig.missing_env_in_use` judges a loaded
    one (a channel without `"enabled": true` is off; a server with `"isActive":
    false` is inactive; a provider counts when an agent names it)."""
    if not isinstance(raw, dict):
        return {}
    missing: dict[str, str] = {}
    _substitute(raw, environ, "", missing)

    def section(key: str) -> dict[str, Any]:
        value = raw.get(key)
        return (
            {k: v for k, v in value.items() if isinstance(v, dict)}
            if isinstance(value, dict)
            else {}
        )

    agents = section("agents") or {"default": {}}
    default = AgentConfig.model_fields["provider"].default
    providers = {a.get("provider", default) for a in agents.values()}
    return _in_use(
        missing,
        channels={k for k, v in section("channels").items() if v.get("enabled") is True},
        servers={
            k for k, v in section("mcpServers").items() if v.get("isActive", True) is not False
        },
        providers={p for p in providers if isinstance(p, str)},
    )


def _format_errors(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        if err["type"] == RETIRED_KEY:
            loc.append(err.get("ctx", {}).get("key", "?"))
        where = ".".join(str(p) for p in loc) or "(top level)"
        reason = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{where}: {reason}")
    return lines


def _invalid(source: str, problems: list[str]) -> ConfigError:
    """One problem on one line (what start-up and `picobot doctor` both print);
    several as a list."""
    if len(problems) == 1:
        return ConfigError(f"{source} is invalid: {problems[0]}")
    return ConfigError(f"{source} is invalid:\n" + "\n".join(f"  {p}" for p in problems))


def parse_config(
    raw: Any, environ: Mapping[str, str], *, source: str = "config"
) -> tuple[Config, dict[str, str]]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object")
    missing: dict[str, str] = {}
    substituted = _substitute(raw, environ, "", missing)
    try:
        config = Config.model_validate(substituted)
    except ValidationError as exc:
        raise _invalid(source, _format_errors(exc)) from None
    problems = config.check_references() + unset_placeholders(config.mcp_servers, missing)
    if problems:
        raise _invalid(source, problems)
    return config, missing


def load_config(
    explicit: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LoadedConfig:
    env = os.environ if environ is None else environ
    path = find_config_file(explicit, env, cwd or Path.cwd())
    raw: Any = {}
    if path is not None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        except RecursionError:
            raise ConfigError(f"{path}: nested too deeply to read") from None
        except ValueError as exc:  # a number longer than int() takes
            raise ConfigError(f"{path}: cannot read: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    config, missing = parse_config(raw, env, source=str(path) if path else "default config")
    static = env.get("STATIC_DIR")
    return LoadedConfig(
        config,
        path,
        picobot_home(env),
        missing,
        admins_from_env(env),
        Path(static).expanduser() if static else None,
        {k: v for k, v in env.items() if k.startswith("OTEL_")},
    )
