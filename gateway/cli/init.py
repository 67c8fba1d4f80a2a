"""`picobot init`: write a starter $PICOBOT_HOME/config.json and agent/AGENT.md.

The file is a complete, valid configuration (checked with the real config
models before it is written) whose secrets are `${ENV_VAR}` placeholders, never
values: the key itself belongs in the environment (or /etc/picobot/env for the
service). On a TTY without flags it asks; otherwise it takes flags. It never replaces an
existing file without --force, and the file is created with mode 0600.
`--locale` (or the last question) picks the language of the default AGENT.md,
which is written only when there is none: an AGENT.md is the user's to edit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from agent.prompt_file import AGENT_PROMPT_FILENAME, DEFAULT_AGENT_PROMPTS
from gateway.config.core import ChannelsConfig, ConfigError
from gateway.config.loading import parse_config, picobot_home

__all__ = ["CHANNELS", "DEFAULT_MODELS", "add_init_arguments", "build_config", "run_init"]

PROVIDERS: Final = ("openai", "anthropic")
LOCALES: Final = tuple(DEFAULT_AGENT_PROMPTS)  # "en", "zh-CN"
DEFAULT_KEY_ENV: Final = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_MODELS: Final = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
CHANNELS: Final = ("websocket", "telegram", "feishu", "wechat", "wecom_kf", "api")
# The variables README.md and config.example.json read for an OpenAI-compatible
# endpoint: init takes them as the defaults of --base-url and --model.
OPENAI_ENV_DEFAULTS: Final = {"base_url": "OPENAI_BASE_URL", "model": "OPENAI_MODEL"}
# Credential keys of each channel section and the variable their placeholder
# names. A key is written only once the channel's config model has it.
CHANNEL_SECRETS: Final[Mapping[str, Mapping[str, str]]] = {
    "telegram": {"token": "TELEGRAM_BOT_TOKEN"},
    "feishu": {"app_id": "FEISHU_APP_ID", "app_secret": "FEISHU_APP_SECRET"},
    "wecom_kf": {
        "corp_id": "WECOM_CORP_ID",
        "secret": "WECOM_KF_SECRET",
        "token": "WECOM_KF_TOKEN",
        "encoding_aes_key": "WECOM_KF_AES_KEY",
    },
}
# The API channel's one key (docs/api.md): a dict of name → key, not a flat one
API_KEY: Final = ("app", "PICOBOT_API_KEY")
# What stands in for each unset variable when the file is checked before it is
# written: 43 characters, the length of a WeCom EncodingAESKey
_STAND_IN: Final = "s" * 43
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InitError(Exception):
    pass


def add_init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=PROVIDERS, help="LLM API flavour (default openai)")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable that will hold the API key (default OPENAI_API_KEY / "
        "ANTHROPIC_API_KEY)",
    )
    parser.add_argument(
        "--model", help="model id (default $OPENAI_MODEL, else gpt-4o-mini / claude-sonnet-4-5)"
    )
    parser.add_argument(
        "--base-url",
        help="OpenAI-compatible endpoint (DeepSeek, Qwen, Ollama, vLLM…; default $OPENAI_BASE_URL)",
    )
    parser.add_argument(
        "--channel",
        action="append",
        choices=CHANNELS,
        help="enable this channel (repeatable; default: websocket only)",
    )
    parser.add_argument(
        "--locale",
        choices=LOCALES,
        help="language of the default AGENT.md (default en); the gateway's own texts "
        "follow gateway.locale",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing config.json")


def build_config(
    provider: str,
    api_key_env: str,
    model: str,
    base_url: str | None,
    channels: Sequence[str],
) -> dict[str, Any]:
    """The starter configuration as a JSON-ready dict (validated by the caller)."""
    provider_section: dict[str, Any] = {"type": provider, "api_key": f"${{{api_key_env}}}"}
    if base_url:
        provider_section["base_url"] = base_url
    channel_sections: dict[str, Any] = {}
    for name in CHANNELS:
        section: dict[str, Any] = {"enabled": name in channels}
        if name in channels:  # a disabled channel's unset variables would only be noise
            for key, env in _channel_secrets(name).items():
                section[key] = f"${{{env}}}"
            if name == "api":
                section["keys"] = {API_KEY[0]: f"${{{API_KEY[1]}}}"}
        channel_sections[name] = section
    return {
        "providers": {"default": provider_section},
        "models": {"default": {"model_id": model}},
        "agents": {"default": {"provider": "default", "model": "default"}},
        "gateway": {"host": "127.0.0.1", "port": 19876, "max_concurrent_runs": 32},
        "channels": channel_sections,
        "time": {"timezone": "UTC"},
        "logging": {"level": "info", "format": "auto"},
    }


def _channel_secrets(name: str) -> dict[str, str]:
    """The credential keys this build's config model of channel `name` has."""
    section_model = ChannelsConfig.model_fields[name].annotation
    known = getattr(section_model, "model_fields", {})
    return {k: env for k, env in CHANNEL_SECRETS.get(name, {}).items() if k in known}


def run_init(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    *,
    interactive: bool,
    out: TextIO,
    ask: Callable[[str], str] = input,
) -> int:
    """Write the starter config. 0 written, 1 refused or invalid.

    `interactive` (a TTY) asks the questions, unless flags already answer them.
    """
    path = picobot_home(environ) / "config.json"
    force = bool(getattr(args, "force", False))
    if path.exists() and not force:
        print(f"{path} already exists; not touching it (use --force to replace it)", file=out)
        return 1
    try:
        flags_given = any(
            getattr(args, name, None)
            for name in ("provider", "api_key_env", "model", "base_url", "channel", "locale")
        )
        asking = interactive and not flags_given
        answers = _ask_all(args, ask, out, environ) if asking else _from_flags(args, environ)
        raw = build_config(*answers[:5])
        # Never write an invalid file. The variables need not be set yet: check
        # the structure with stand-in values.
        stand_ins = dict.fromkeys(_placeholders(raw), _STAND_IN)
        parse_config(raw, stand_ins, source="generated config")
        _write(path, json.dumps(raw, indent=2, ensure_ascii=False) + "\n", force=force)
        prompt_written = _write_agent_prompt(path.parent, answers[5])
    except (InitError, ConfigError) as exc:
        print(f"init failed: {exc}", file=out)
        return 1
    except EOFError:
        print("init aborted", file=out)
        return 1
    except FileExistsError:
        print(f"{path} appeared meanwhile; not touching it (use --force)", file=out)
        return 1
    except OSError as exc:
        print(f"init failed: cannot write {path}: {exc.strerror}", file=out)
        return 1
    _print_next_steps(path, answers, out, environ)
    prompt = path.parent / "agent" / AGENT_PROMPT_FILENAME
    if prompt_written:
        print(f"wrote {prompt} ({answers[5]}): the agent's persona, yours to edit", file=out)
    else:
        print(f"kept {prompt}: it exists (delete it to get the {answers[5]} default)", file=out)
    return 0


def _write_agent_prompt(home: Path, locale: str) -> bool:
    """The default AGENT.md of `locale`, unless there is one; whether it was written."""
    agent_dir = home / "agent"
    agent_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        with (agent_dir / AGENT_PROMPT_FILENAME).open("x", encoding="utf-8") as handle:
            handle.write(DEFAULT_AGENT_PROMPTS[locale])
    except FileExistsError:
        return False
    return True


def _placeholders(raw: dict[str, Any]) -> list[str]:
    return re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", json.dumps(raw))


Answers = tuple[str, str, str, str | None, list[str], str]


def _defaults(provider: str, environ: Mapping[str, str]) -> tuple[str, str | None]:
    """The model id and base URL when no flag names them: for an OpenAI-compatible
    provider, $OPENAI_MODEL and $OPENAI_BASE_URL where set."""
    if provider != "openai":
        return DEFAULT_MODELS[provider], None
    model = environ.get(OPENAI_ENV_DEFAULTS["model"], "").strip() or DEFAULT_MODELS[provider]
    return model, environ.get(OPENAI_ENV_DEFAULTS["base_url"], "").strip() or None


def _from_flags(args: argparse.Namespace, environ: Mapping[str, str]) -> Answers:
    provider = getattr(args, "provider", None) or "openai"
    if provider not in PROVIDERS:
        raise InitError(f"unknown provider {provider!r} (openai or anthropic)")
    env = getattr(args, "api_key_env", None) or DEFAULT_KEY_ENV[provider]
    _check_env_name(env)
    default_model, default_url = _defaults(provider, environ)
    model = getattr(args, "model", None) or default_model
    base_url = getattr(args, "base_url", None) or default_url
    _check_url(base_url)
    channels = list(dict.fromkeys(getattr(args, "channel", None) or ["websocket"]))
    for name in channels:
        if name not in CHANNELS:
            raise InitError(f"unknown channel {name!r} ({', '.join(CHANNELS)})")
    locale = getattr(args, "locale", None) or "en"
    _check_locale(locale)
    return provider, env, model, base_url, channels, locale


def _ask_all(
    args: argparse.Namespace, ask: Callable[[str], str], out: TextIO, environ: Mapping[str, str]
) -> Answers:
    defaults = _from_flags(args, environ)  # flags given on a TTY become the suggested answers
    provider = _ask(ask, out, f"LLM provider ({'/'.join(PROVIDERS)})", defaults[0], _check_provider)
    env_default = defaults[1] if getattr(args, "api_key_env", None) else DEFAULT_KEY_ENV[provider]
    env = _ask(ask, out, "environment variable holding the API key", env_default, _check_env_name)
    default_model, default_url = _defaults(provider, environ)
    model_default = defaults[2] if getattr(args, "model", None) else default_model
    model = _ask(ask, out, "model id", model_default, _check_model)
    url_default = defaults[3] if getattr(args, "base_url", None) else default_url
    base_url = _ask(ask, out, "base URL (empty: the provider's own)", url_default or "", _check_url)
    channels_text = _ask(
        ask,
        out,
        f"channels to enable ({', '.join(CHANNELS)})",
        ",".join(defaults[4]),
        _check_channels,
    )
    locale = _ask(
        ask, out, f"language of AGENT.md ({'/'.join(LOCALES)})", defaults[5], _check_locale
    )
    return provider, env, model, base_url or None, _split(channels_text), locale


def _ask(
    ask: Callable[[str], str],
    out: TextIO,
    question: str,
    default: str,
    check: Callable[[str], None],
) -> str:
    for _ in range(3):
        answer = ask(f"{question} [{default}]: ").strip() or default
        try:
            check(answer)
        except InitError as exc:
            print(exc, file=out)
            continue
        return answer
    raise InitError(f"no valid answer for: {question}")


def _check_provider(value: str) -> None:
    if value not in PROVIDERS:
        raise InitError(f"unknown provider {value!r} (openai or anthropic)")


def _check_env_name(value: str) -> None:
    if not _ENV_NAME.fullmatch(value):
        raise InitError(
            f"{value!r} is not an environment variable name (letters, digits, _): "
            "give the NAME of the variable, not the key itself"
        )


def _check_model(value: str) -> None:
    if not value:
        raise InitError("the model id cannot be empty")


def _check_url(value: str | None) -> None:
    if value and not re.match(r"https?://[^\s/]+", value):
        raise InitError(f"{value!r} is not an http(s) URL")


def _split(text: str) -> list[str]:
    return list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))


def _check_channels(value: str) -> None:
    unknown = [c for c in _split(value) if c not in CHANNELS]
    if unknown:
        raise InitError(f"unknown channel(s) {', '.join(unknown)} ({', '.join(CHANNELS)})")


def _check_locale(value: str) -> None:
    if value not in LOCALES:
        raise InitError(f"unknown locale {value!r} ({', '.join(LOCALES)})")


def _write(path: Path, text: str, *, force: bool) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not force:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        path.chmod(0o600)  # whatever the umask
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _print_next_steps(
    path: Path, answers: Answers, out: TextIO, environ: Mapping[str, str]
) -> None:
    provider, env, model, base_url, channels, _ = answers

    def source(key: str, value: str | None) -> str:
        var = OPENAI_ENV_DEFAULTS[key]
        taken = provider == "openai" and value and environ.get(var, "").strip() == value
        return f" (from ${var})" if taken else ""

    print(f"wrote {path} (mode 0600): {provider} model {model}{source('model', model)}", file=out)
    if base_url:
        print(f"  endpoint {base_url}{source('base_url', base_url)}", file=out)
    print(f"  channels enabled: {', '.join(channels) or 'none'}", file=out)
    variables = [env]
    for name in channels:
        variables.extend(_channel_secrets(name).values())
        if name == "api":
            variables.append(API_KEY[1])
    print("next:", file=out)
    print(
        f"  set {', '.join(variables)} in the environment (for the service: /etc/picobot/env)",
        file=out,
    )
    print("  picobot doctor    # checks the config, storage and credentials", file=out)
    print("  picobot gateway   # runs the daemon", file=out)
