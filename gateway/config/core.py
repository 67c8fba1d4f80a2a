"""The configuration's frozen pydantic models: `Config` and its sections.

Read and validated by gateway.config.loading (`load_config`) once, in the
composition root, and passed down; nothing reads it at run time. Unknown keys
and wrong types fail start-up with the JSON path of the offending key and the
reason (`ConfigError`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agent.mcp.config import McpServerConfig
from channels.api.config import ApiConfig
from channels.base import ChannelSettings, DailyTime, LocaleSetting, ServedHosts
from channels.feishu.config import FeishuConfig
from channels.telegram.config import TelegramConfig, TelegramMode
from channels.websocket import WebSocketConfig
from channels.wechat.config import WechatConfig
from channels.wecom_kf.config import WecomKfConfig
from gateway.config.agents import (
    TEMPERATURE_LIMITS,
    AgentConfig,
    CompactionConfig,
    FrozenModel,
    ModelConfig,
    ModelPrices,
    ProviderConfig,
)
from gateway.config.approval import ApprovalConfig
from gateway.config.limits import LimitsConfig
from gateway.config.skills import SkillsConfig
from gateway.config.subagents import SessionMessageToolConfig, SubagentsConfig
from gateway.config.tool_names import unknown_tool_names
from scheduler.config import SchedulerConfig
from storage.url import redact_url, sqlite_path_of

__all__ = [
    "AgentConfig",
    "CompactionConfig",
    "Config",
    "ConfigError",
    "ModelConfig",
    "ModelPrices",
    "ObservabilityConfig",
    "ProviderConfig",
    "QueueMode",
    "SkillsConfig",
    "SubagentsConfig",
    "admins_from_env",
]


class ConfigError(Exception):
    """The configuration cannot be used; the message says where and why."""


class QueueMode(StrEnum):
    COLLECT = "collect"
    FOLLOWUP = "followup"
    STEER = "steer"  # a message mid-turn ends the turn at its next safe boundary


def check_admin_entry(entry: str) -> str:
    """An admin is named "channel:sender_id", e.g. "telegram:123456789"."""
    channel, sep, sender = entry.partition(":")
    if not sep or not channel or not sender or any(c.isspace() for c in entry):
        raise ValueError(f"{entry!r} is not channel:sender_id (e.g. telegram:123456789)")
    return entry


RETIRED_KEY = "retired_key"  # a key that used to exist: its error names it and says why


class GatewayConfig(FrozenModel):
    host: str = "127.0.0.1"
    port: int = Field(19876, ge=0, le=65535)
    auth_token: SecretStr | None = None
    max_concurrent_runs: int = Field(32, ge=1)
    queue_mode: QueueMode = QueueMode.COLLECT
    max_pending_per_session: int = Field(20, ge=1)
    agent_prompt_reinject_every: int = Field(100, ge=0)
    inbound_queue_capacity: int = Field(1024, ge=1)
    outbound_retry_base_secs: float = Field(1.0, gt=0)
    outbound_retry_max_secs: float = Field(300.0, gt=0)
    outbound_give_up_after_secs: float = Field(86_400.0, gt=0)
    outbound_stale_notice_secs: float = Field(600.0, ge=0)
    send_timeout_secs: float = Field(30.0, gt=0)
    outbox_rescan_secs: float = Field(30.0, gt=0)
    shutdown_timeout_secs: float = Field(30.0, gt=0)
    typing_delay_secs: float = Field(0.5, ge=0)
    # "channel:sender_id" of each admin (gateway.access.policy); PICOBOT_ADMINS adds more
    admins: list[Annotated[str, AfterValidator(check_admin_entry)]] = Field(default_factory=list)
    show_tool_results: bool = False
    session_ttl_secs: float = Field(0.0, ge=0)  # 0: never
    session_reset_at: DailyTime | None = None  # local "HH:MM" in time.timezone
    locale: LocaleSetting = "auto"  # the language of the gateway's own texts (gateway.i18n.locales)
    # Host names served besides the loopback ones and `host` ("name" or
    # "name:port"; the port is ignored): channels.served_hosts
    public_hosts: list[Annotated[str, AfterValidator(ServedHosts.check_entry)]] = Field(
        default_factory=list
    )
    public_url: Annotated[str, AfterValidator(ServedHosts.check_url)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _retired_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "outbound_max_attempts" in data:
            raise PydanticCustomError(
                RETIRED_KEY,
                "retired: a reply is no longer given up after a number of attempts but "
                "when gateway.outbound_give_up_after_secs (default 86400, one day) pass "
                "without delivery; remove this key",
                {"key": "outbound_max_attempts"},
            )
        return data

    @property
    def loopback_only(self) -> bool:
        return self.host in {"127.0.0.1", "localhost", "::1"}


def admins_from_env(environ: Mapping[str, str]) -> tuple[str, ...]:
    """PICOBOT_ADMINS: admins separated by commas or whitespace."""
    raw = environ.get("PICOBOT_ADMINS", "")
    entries = tuple(e for e in re.split(r"[\s,]+", raw) if e)
    try:
        return tuple(check_admin_entry(e) for e in entries)
    except ValueError as exc:
        raise ConfigError(f"PICOBOT_ADMINS: {exc}") from None


class ChannelsConfig(FrozenModel):
    websocket: WebSocketConfig = Field(default_factory=WebSocketConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    feishu: FeishuConfig = Field(default_factory=FeishuConfig)
    wechat: WechatConfig = Field(default_factory=WechatConfig)
    wecom_kf: WecomKfConfig = Field(default_factory=WecomKfConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)

    def enabled(self) -> dict[str, ChannelSettings]:
        sections: dict[str, ChannelSettings] = {
            "websocket": self.websocket,
            "telegram": self.telegram,
            "feishu": self.feishu,
            "wechat": self.wechat,
            "wecom_kf": self.wecom_kf,
            "api": self.api,
        }
        return {name: s for name, s in sections.items() if s.enabled}


class HttpToolConfig(FrozenModel):
    allow_private: bool = False
    timeout_secs: float = Field(30.0, gt=0)
    max_response_bytes: int = Field(2_000_000, gt=0)


class BashToolConfig(FrozenModel):
    """The shell tool's sandbox (agent/tools/sandbox.py, docs/OPERATIONS.md)."""

    sandbox: Literal["auto", "bwrap", "off"] = "auto"
    network: bool = True
    max_processes: int | None = Field(1024, ge=16)


class ToolsConfig(FrozenModel):
    disabled: list[str] = Field(default_factory=list)
    workspace: str | None = None
    restrict_to_workspace: bool = True
    timeout_secs: float = Field(120.0, gt=0)
    read_max_bytes: int = Field(256_000, gt=0)
    exec_timeout_secs: float = Field(60.0, gt=0)
    exec_output_max_chars: int = Field(20_000, gt=0)
    http: HttpToolConfig = Field(default_factory=HttpToolConfig)
    bash: BashToolConfig = Field(default_factory=BashToolConfig)
    send_session_message: SessionMessageToolConfig = Field(default_factory=SessionMessageToolConfig)
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)


class TimeConfig(FrozenModel):
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # "Asia" is a directory
            raise ValueError(f"unknown IANA time zone {value!r}") from exc
        return value

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


_STORAGE_SCHEMES = ("postgresql", "postgres", "sqlite")


def check_storage_url(url: str) -> str:
    """A `storage.url` that `storage.backends.open_database` takes, checked at
    load so that a typo fails start-up with the key's name, not a connect
    error later. Every message shows the URL with its password masked."""
    shown = redact_url(url)
    if not url.strip():
        raise ValueError(
            "is empty (a ${VAR} that is not set?); remove the key to use the SQLite file"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ValueError(f"{shown!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower() if "://" in url else ""
    if not scheme:
        raise ValueError(
            f"{shown!r} is not a URL; set storage.path to a SQLite file, or use "
            "sqlite:///path/to/file.db or postgresql://user:password@host:port/database"
        )
    if scheme not in _STORAGE_SCHEMES:
        raise ValueError(
            f"{shown!r}: unknown scheme {scheme!r}; use sqlite:///path/to/file.db or "
            "postgresql://user:password@host:port/database (docs/storage.md)"
        )
    if scheme == "sqlite":
        # a SQLite URL holds no password: shown as written
        if not url.lower().startswith("sqlite:///"):
            raise ValueError(f"{url!r}: a SQLite URL is sqlite:///path (three slashes)")
        if sqlite_path_of(url) in ("", ":memory:"):
            raise ValueError(f"{url!r} names no file; use sqlite:///path/to/file.db")
    return url


class StorageConfig(FrozenModel):
    path: str | None = None  # the SQLite file; default: $PICOBOT_HOME/storage/sessions.db
    # the backend by URL: sqlite:///file.db or postgresql://… (docs/storage.md)
    url: Annotated[str, AfterValidator(check_storage_url)] | None = None
    # finished outbox/inbox rows, dead letters, done approvals, skill events (0: keep)
    retention_days: float = Field(30.0, ge=0)
    media_retention_days: float = Field(30.0, ge=0)  # received attachments (0: keep)
    prune_interval_secs: float = Field(3600.0, gt=0)

    @model_validator(mode="after")
    def _one_location(self) -> StorageConfig:
        if self.path and self.url:
            raise ValueError(
                "storage.path and storage.url are both set; keep one: storage.url "
                "(sqlite:///file.db or postgresql://…) or storage.path (a SQLite file)"
            )
        return self


class ClusterConfig(FrozenModel):
    """Several gateways on one PostgreSQL database (docs/scale-out.md); ignored on
    SQLite. `worker_name`: this worker's name in logs and `picobot workers`
    (default `<host name>:<gateway.port>`); `lease_secs`: how long a silent
    worker keeps its chats, channels and jobs before another takes them."""

    worker_name: str = Field("", max_length=64, pattern=r"^[A-Za-z0-9_.:@-]*$")
    lease_secs: float = Field(10.0, ge=1.0, le=300.0)


class LoggingConfig(FrozenModel):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "console", "json"] = "auto"


def check_otlp_endpoint(url: str | None) -> str | None:
    """An OTLP/HTTP collector's base URL: http(s)://host[:port][/path]."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{url!r}: an OTLP/HTTP endpoint is http(s)://host:port, e.g. http://127.0.0.1:4318"
        )
    return url


class ObservabilityConfig(FrozenModel):
    """OpenTelemetry traces (docs/observability.md). `otlp_endpoint`: the OTLP/HTTP
    collector's base URL (spans go to its /v1/traces); None: off, unless the
    environment sets OTEL_EXPORTER_OTLP_ENDPOINT."""

    otlp_endpoint: Annotated[str | None, AfterValidator(check_otlp_endpoint)] = None


def _default_providers() -> dict[str, ProviderConfig]:
    return {"default": ProviderConfig()}


def _default_models() -> dict[str, ModelConfig]:
    return {"default": ModelConfig(model_id="gpt-4o-mini")}


def _default_agents() -> dict[str, AgentConfig]:
    return {"default": AgentConfig()}


class Config(FrozenModel):
    providers: dict[str, ProviderConfig] = Field(default_factory=_default_providers)
    models: dict[str, ModelConfig] = Field(default_factory=_default_models)
    agents: dict[str, AgentConfig] = Field(default_factory=_default_agents)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    time: TimeConfig = Field(default_factory=TimeConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    # The spec's (and Claude Desktop's) spelling; see docs/mcp.md.
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict, alias="mcpServers")

    @property
    def served_hosts(self) -> ServedHosts:
        """The `Host` names the HTTP server answers to (gateway/http.py): the
        bound address, `gateway.public_hosts`, the host of `gateway.public_url`
        and, in webhook mode, of Telegram's `webhook_url` (Telegram calls it)."""
        gateway, telegram = self.gateway, self.channels.telegram
        urls = [gateway.public_url]
        if telegram.enabled and telegram.mode is TelegramMode.WEBHOOK:
            urls.append(telegram.webhook_url)
        public = [*gateway.public_hosts]
        for url in urls:
            with contextlib.suppress(ValueError):  # not a URL of a host: serves no name
                public.append(urlsplit(ServedHosts.check_url(url or "")).netloc)
        return ServedHosts.of(public, gateway.host)

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
            for n, fallback in enumerate(agent.fallbacks):
                where = f"agents.{name}.fallbacks[{n}]"
                if fallback.provider not in self.providers:
                    problems.append(f"{where}.provider: no provider named {fallback.provider!r}")
                if fallback.model not in self.models:
                    problems.append(f"{where}.model: no model named {fallback.model!r}")
        for name, channel in self.channels.enabled().items():
            if channel.agent not in self.agents:
                problems.append(f"channels.{name}.agent: no agent named {channel.agent!r}")
        for n, job in enumerate(self.scheduler.jobs):
            agent_name = getattr(job.payload, "agent", None)
            if agent_name is not None and agent_name not in self.agents:
                problems.append(
                    f"scheduler.jobs[{n}] ({job.id}): payload.agent: no agent named {agent_name!r}"
                )
        problems += unknown_tool_names("tools.disabled", self.tools.disabled)
        problems += unknown_tool_names("tools.approval.tools", self.tools.approval.tools)
        problems.extend(
            "mcpServers: a server key must not be empty" for key in self.mcp_servers if not key
        )
        problems += self._provider_limits()
        token = self.gateway.auth_token
        no_token = token is None or not token.get_secret_value()
        if not self.gateway.loopback_only and self.channels.websocket.enabled and no_token:
            problems.append(
                "gateway.auth_token: required when gateway.host is not a loopback "
                f"address ({self.gateway.host!r})"
            )
        api = self.channels.api
        if not self.gateway.loopback_only and api.enabled and no_token and not api.keys:
            problems.append(
                "channels.api.keys: an API key (or gateway.auth_token) is required when "
                f"gateway.host is not a loopback address ({self.gateway.host!r})"
            )
        return problems

    def job_target_problems(self, channels: Collection[str]) -> list[str]:
        """Configured jobs that would fail every run: their target channel is
        not among `channels` (the enabled ones; start-up passes the channels
        it runs, `picobot doctor` the config's). None while the scheduler is off."""
        if not self.scheduler.enabled:
            return []
        return [
            f"scheduler.jobs[{n}] ({job.id}): target.channel: {target.channel!r} is not an "
            "enabled channel (enable it, or set the job's enabled to false)"
            for n, job in enumerate(self.scheduler.jobs)
            if job.enabled
            and (target := getattr(job, "target", None)) is not None
            and target.channel not in channels
        ]

    def _provider_limits(self) -> list[str]:
        """Values a provider's type refuses: every turn would fail at run time."""
        problems: list[str] = []
        for name, each in self.providers.items():
            if each.type != "anthropic" and each.prompt_cache_ttl != "5m":
                problems.append(
                    f"providers.{name}.prompt_cache_ttl: only anthropic providers take a TTL"
                )
        for name, agent in self.agents.items():
            pairs = [
                (agent.provider, agent.model),
                *((f.provider, f.model) for f in agent.fallbacks),
            ]
            for provider_name, model_name in pairs:
                provider = self.providers.get(provider_name)
                model = self.models.get(model_name)
                if provider is None or model is None or model.temperature is None:
                    continue
                low, high = TEMPERATURE_LIMITS[provider.type]
                if not low <= model.temperature <= high:
                    problems.append(
                        f"providers.{provider_name}: models.{model_name}.temperature "
                        f"{model.temperature} is out of range: {provider.type} providers take "
                        f"{low:g} to {high:g} (agents.{name} uses both)"
                    )
        return problems
