"""Configuration: JSON file → environment placeholders → frozen pydantic models.

Loaded once by the composition root (`load_config`) and passed down; nothing
calls it at run time. Unknown keys and wrong types fail start-up with the JSON
path of the offending key and the reason (`ConfigError`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from channels.base import ChannelSettings
from channels.feishu.config import FeishuConfig
from channels.telegram.config import TelegramConfig
from channels.websocket import WebSocketConfig
from channels.wechat.config import WechatConfig
from scheduler.config import SchedulerConfig

__all__ = [
    "AgentConfig",
    "CompactionConfig",
    "Config",
    "ConfigError",
    "LoadedConfig",
    "ModelConfig",
    "ProviderConfig",
    "QueueMode",
    "find_config_file",
    "load_config",
    "parse_config",
    "picobot_home",
]


class ConfigError(Exception):
    """The configuration cannot be used; the message says where and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProviderConfig(_Model):
    type: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    api_key: SecretStr = SecretStr("")
    extra_headers: dict[str, str] = Field(default_factory=dict)
    llm_timeout_secs: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    retry_max_wait_secs: float = Field(60.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None


class ModelConfig(_Model):
    model_id: str = Field(min_length=1)
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, gt=0)
    context_window_tokens: int = Field(128_000, gt=0)
    supports_vision: bool = True


class CompactionConfig(_Model):
    enabled: bool = True
    trigger_ratio: float = Field(0.5, gt=0, lt=1)
    keep_user_turns: int = Field(3, ge=1)
    summary_model: str | None = None


class AgentConfig(_Model):
    provider: str = "default"
    model: str = "default"
    max_tool_iterations: int = Field(100, ge=1)
    tool_result_max_chars: int = Field(20_000, ge=100)
    context_tool_result_trim_chars: int = Field(2_000, ge=100)
    system_prompt: str | None = None
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)


class QueueMode(StrEnum):
    COLLECT = "collect"
    FOLLOWUP = "followup"


class GatewayConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(19876, ge=0, le=65535)
    auth_token: SecretStr | None = None
    max_concurrent_runs: int = Field(32, ge=1)
    queue_mode: QueueMode = QueueMode.COLLECT
    max_pending_per_session: int = Field(20, ge=1)
    agent_prompt_reinject_every: int = Field(100, ge=0)
    inbound_queue_capacity: int = Field(1024, ge=1)
    outbound_max_attempts: int = Field(8, ge=1)
    outbound_retry_base_secs: float = Field(1.0, gt=0)
    outbound_retry_max_secs: float = Field(300.0, gt=0)
    send_timeout_secs: float = Field(30.0, gt=0)
    outbox_rescan_secs: float = Field(30.0, gt=0)
    shutdown_timeout_secs: float = Field(30.0, gt=0)
    typing_delay_secs: float = Field(0.5, ge=0)

    @property
    def loopback_only(self) -> bool:
        return self.host in {"127.0.0.1", "localhost", "::1"}


class ChannelsConfig(_Model):
    websocket: WebSocketConfig = Field(default_factory=WebSocketConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    feishu: FeishuConfig = Field(default_factory=FeishuConfig)
    wechat: WechatConfig = Field(default_factory=WechatConfig)

    def enabled(self) -> dict[str, ChannelSettings]:
        sections: dict[str, ChannelSettings] = {
            "websocket": self.websocket,
            "telegram": self.telegram,
            "feishu": self.feishu,
            "wechat": self.wechat,
        }
        return {name: s for name, s in sections.items() if s.enabled}


class HttpToolConfig(_Model):
    allow_private: bool = False
    timeout_secs: float = Field(30.0, gt=0)
    max_response_bytes: int = Field(2_000_000, gt=0)


class ToolsConfig(_Model):
    disabled: list[str] = Field(default_factory=list)
    workspace: str | None = None
    restrict_to_workspace: bool = True
    timeout_secs: float = Field(120.0, gt=0)
    read_max_bytes: int = Field(256_000, gt=0)
    exec_timeout_secs: float = Field(60.0, gt=0)
    exec_output_max_chars: int = Field(20_000, gt=0)
    http: HttpToolConfig = Field(default_factory=HttpToolConfig)


class TimeConfig(_Model):
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r}") from exc
        return value

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class StorageConfig(_Model):
    path: str | None = None  # default: $PICOBOT_HOME/storage/sessions.db


class LoggingConfig(_Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "console", "json"] = "auto"


def _default_providers() -> dict[str, ProviderConfig]:
    return {"default": ProviderConfig()}


def _default_models() -> dict[str, ModelConfig]:
    return {"default": ModelConfig(model_id="gpt-4o-mini")}


def _default_agents() -> dict[str, AgentConfig]:
    return {"default": AgentConfig()}


class Config(_Model):
    providers: dict[str, ProviderConfig] = Field(default_factory=_default_providers)
    models: dict[str, ModelConfig] = Field(default_factory=_default_models)
    agents: dict[str, AgentConfig] = Field(default_factory=_default_agents)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    time: TimeConfig = Field(default_factory=TimeConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    def check_references(self) -> list[str]:
        """Cross-references pydantic cannot see: agents → providers/models,
        channels and scheduled jobs → agents."""
        problems: list[str] = []
        for name, agent in self.agents.items():
            if agent.provider not in self.providers:
                problems.append(f"agents.{name}.provider: no provider named {agent.provider!r}")
            if agent.model not in self.models:
                problems.append(f"agents.{name}.model: no model named {agent.model!r}")
            summary = agent.compaction.summary_model
            if summary is not None and summary not in self.models:
                problems.append(
                    f"agents.{name}.compaction.summary_model: no model named {summary!r}"
                )
        for name, channel in self.channels.enabled().items():
            if channel.agent not in self.agents:
                problems.append(f"channels.{name}.agent: no agent named {channel.agent!r}")
        for n, job in enumerate(self.scheduler.jobs):
            agent_name = getattr(job.payload, "agent", None)
            if agent_name is not None and agent_name not in self.agents:
                problems.append(
                    f"scheduler.jobs[{n}] ({job.id}): payload.agent: no agent named {agent_name!r}"
                )
        if not self.gateway.loopback_only and self.channels.websocket.enabled:
            token = self.gateway.auth_token
            if token is None or not token.get_secret_value():
                problems.append(
                    "gateway.auth_token: required when gateway.host is not a loopback "
                    f"address ({self.gateway.host!r})"
                )
        return problems


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: Config
    path: Path | None  # None: built-in defaults, no file found
    home: Path
    # JSON path → environment variable named by a placeholder that was unset.
    missing_env: Mapping[str, str]
    static_dir: Path | None = None  # $STATIC_DIR: serve the web UI from disk (development)

    @property
    def storage_path(self) -> Path:
        return (
            Path(self.config.storage.path).expanduser()
            if self.config.storage.path
            else (self.home / "storage" / "sessions.db")
        )

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


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        reason = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"  {where}: {reason}")
    return "\n".join(lines)


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
        raise ConfigError(f"{source} is invalid:\n{_format_errors(exc)}") from None
    problems = config.check_references()
    if problems:
        raise ConfigError(f"{source} is invalid:\n" + "\n".join(f"  {p}" for p in problems))
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
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    config, missing = parse_config(raw, env, source=str(path) if path else "default config")
    static = env.get("STATIC_DIR")
    return LoadedConfig(
        config, path, picobot_home(env), missing, Path(static).expanduser() if static else None
    )
