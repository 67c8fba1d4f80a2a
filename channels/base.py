"""The channel contract and what the runtime hands a channel.

A channel turns platform events into `InboundMessage`s (`await runtime.bus.submit`
before acknowledging the platform) and delivers `OutboundMessage`s. It imports
only `gateway.bus` and this module; storage, HTTP routing and the media
directory reach it through `ChannelRuntime`.

Errors raised by `send`:

    ChannelError
    ├── RateLimited(retry_after)   retried after the platform's delay
    ├── TransientSendError         retried with backoff
    │   └── RecipientOffline       parked until the recipient is reachable again
    └── PermanentSendError         not retried (blocked, kicked, bad chat)
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from aiohttp import web
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from channels.served_hosts import SERVED_HOSTS, ServedHosts
from gateway.bus import ChannelEvent, MediaKind, MessageBus, OutboundMessage

__all__ = [
    "SERVED_HOSTS",
    "Capabilities",
    "Channel",
    "ChannelError",
    "ChannelRuntime",
    "ChannelSettings",
    "ChatDirectory",
    "ChatOwners",
    "CommandInfo",
    "DailyTime",
    "GroupAccess",
    "Handler",
    "History",
    "HistoryEntry",
    "HttpMount",
    "LocaleSetting",
    "PermanentSendError",
    "RateLimited",
    "RecipientOffline",
    "Refusal",
    "ReplyArchive",
    "SendResult",
    "ServedHosts",
    "SessionInfo",
    "SessionList",
    "StateStore",
    "StoredReply",
    "ToolCallInfo",
    "ToolFilter",
    "TransientSendError",
    "origin_allowed",
    "split_text",
]


class ChannelError(Exception):
    pass


class RateLimited(ChannelError):
    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientSendError(ChannelError):
    pass


class RecipientOffline(TransientSendError):
    """Nobody is connected to receive this chat's messages right now."""


class PermanentSendError(ChannelError):
    pass


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_message_chars: int = 4000
    can_edit: bool = False
    can_stream: bool = False
    can_show_typing: bool = False
    media_kinds: frozenset[MediaKind] = field(default_factory=frozenset)  # received
    # What `OutboundMessage.media` may carry to this channel (the `send_file` tool).
    send_media: frozenset[MediaKind] = field(default_factory=frozenset)
    # The protocol carries every tool call of a turn as an event of its own,
    # whatever `show_tool_results` says (its clients choose what to show).
    tool_events: bool = False


@dataclass(frozen=True, slots=True)
class SendResult:
    platform_message_ids: tuple[str, ...] = ()


class StateStore(Protocol):
    """Small persistent key/value state scoped to one channel (cursors, tokens).

    State kept for one outbox row must be keyed `progress:<outbox id>`, or
    start with `upload:` or `streamed:` and contain the row's idempotency
    key: the gateway deletes such keys once the row is delivered
    (storage.sql.retention). Other keys are the channel's own and are kept."""

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str) -> None: ...


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpMount(Protocol):
    def add_route(self, method: str, path: str, handler: Handler) -> None: ...


class ChannelRuntime(Protocol):
    bus: MessageBus
    state: StateStore
    http: HttpMount
    media_dir: Path

    async def dead_letter(self, platform_id: str | None, payload: str | bytes, reason: str) -> None:
        """Keep an inbound event this channel cannot parse or record (the raw
        `payload`, capped; `reason` short, never a secret) in the dead-letter
        table. Once it returns the event is durable: move the cursor past it /
        answer the platform 200. If it raises, do not acknowledge."""
        ...

    def recipient_online(self, chat_id: str) -> None:
        """Tell the dispatcher that parked messages for `chat_id` can go now."""
        ...

    def register_secret(self, value: str) -> None:
        """Keep `value` (a credential the channel obtained at run time, such as
        a token from a QR login) out of every log line from now on."""
        ...


class Channel(ABC):
    """Lifecycle: `setup` (routes; before the HTTP server starts) → `start`
    (returns once connected) → `stop`. `ready`/`not_ready_reason` feed /ready."""

    name: str
    capabilities: Capabilities = Capabilities()
    # With several workers on one database (docs/scale-out.md): True when the
    # platform allows one connection per account (long polling, a long
    # connection), so that only the worker holding the channel's lease runs it.
    exclusive_connection: bool = False
    # True when the recipients are connected to this process (WebSocket
    # clients, waiting API requests): each worker sends to its own (`reaches`).
    local_recipients: bool = False

    def __init__(self) -> None:
        self.not_ready_reason: str | None = "not started"

    def reaches(self, chat_id: str) -> bool:
        """Whether a recipient of `chat_id` is connected to this process (asked
        only of a channel with `local_recipients`)."""
        return True

    @property
    def ready(self) -> bool:
        return self.not_ready_reason is None

    def setup(self, runtime: ChannelRuntime) -> None:  # noqa: B027 - optional hook
        """Register HTTP routes etc. Called once, before the server starts."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    @abstractmethod
    async def send(self, message: OutboundMessage) -> SendResult: ...

    async def notify(self, event: ChannelEvent) -> None:  # noqa: B027 - optional hook
        """Typing/streaming signals; best effort, must not raise for delivery problems."""


def split_text(text: str, limit: int) -> list[str]:
    """Split on paragraph, then line, then word boundaries; hard-cut as a last resort."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[: limit + 1]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            cut = window.rfind(sep, 0, limit + 1)
            if cut > 0:
                break
        if cut <= 0:
            chunks.append(rest[:limit])
            rest = rest[limit:]
            continue
        chunks.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip("\n ")
    if rest or not chunks:
        chunks.append(rest)
    return [c for c in chunks if c] or [""]


class ToolFilter(BaseModel):
    """Narrow the agent's tools on one channel: `allow` (None = all) minus `deny`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class Refusal(StrEnum):
    """What a sender without access gets (at most once an hour; gateway.access.policy)."""

    SILENT = "silent"  # nothing (a log line)
    EXPLAIN = "explain"  # their id and how to get access
    PAIR = "pair"  # a pairing code an admin can approve (private chats; needs `pairing`)


class GroupAccess(BaseModel):
    """Which group chats the channel serves and whether the bot must be addressed there."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    allow: Literal["*"] | list[str] = "*"  # group chat ids; "*" every group, [] none
    require_mention: bool = True  # a mention, a reply to the bot or a command for it


_DAILY_TIME = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


def _daily_time(value: str) -> str:
    if value != "off" and not _DAILY_TIME.match(value):
        raise ValueError(f'{value!r} is not a time of day as HH:MM (00:00-23:59) or "off"')
    return value


# A local time of day "HH:MM" (24 h), or "off".
DailyTime = Annotated[str, AfterValidator(_daily_time)]

# The language of the gateway's own texts (gateway.i18n.locales): "auto" follows
# the sender's platform language, else time.timezone.
LocaleSetting = Literal["auto", "zh-CN", "en"]


class ChannelSettings(BaseModel):
    """Keys every channel section shares. `show_tool_results`,
    `session_ttl_secs` and `session_reset_at` override the gateway-wide keys of
    the same names; None there means "as the gateway says"."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = False
    agent: str = "default"
    allow_from: list[str] = Field(default_factory=lambda: ["*"])
    tools: ToolFilter = Field(default_factory=ToolFilter)
    show_tool_results: bool | None = None
    session_ttl_secs: float | None = Field(None, ge=0)
    session_reset_at: DailyTime | None = None
    locale: LocaleSetting | None = None  # None: gateway.locale

    # Access control (gateway.access.policy): pairing codes, refusals, groups.
    pairing: bool = False
    refusal: Refusal | None = None  # None: "pair" when pairing is on, else "explain"
    groups: GroupAccess = Field(default_factory=GroupAccess)

    @model_validator(mode="after")
    def _check_refusal(self) -> ChannelSettings:
        if self.refusal is Refusal.PAIR and not self.pairing:
            raise ValueError('refusal "pair" needs pairing: true')
        return self

    @property
    def refusal_mode(self) -> Refusal:
        if self.refusal is not None:
            return self.refusal
        return Refusal.PAIR if self.pairing else Refusal.EXPLAIN


def origin_allowed(request: web.Request, allowed: Iterable[str] = ()) -> bool:
    """Programs send no Origin; a browser page may reach the gateway only from
    an origin whose host the gateway serves (`ServedHosts`, which the HTTP app
    carries as `SERVED_HOSTS`) or one in `allowed`: no cross-site or
    DNS-rebinding use of a route that acts or reads for the user."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    if origin == "null":  # sandboxed frames, file: pages: whoever they are
        return False
    if origin in allowed:
        return True
    served = request.app.get(SERVED_HOSTS) or ServedHosts()
    return served.origin_allowed(origin, request.headers.get("Host"))


# -- what a client may read about its own chat (the WebSocket channel's queries) --


@dataclass(frozen=True, slots=True)
class CommandInfo:
    name: str
    help: str


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    title: str | None
    archived: bool
    message_count: int
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class SessionList:
    sessions: tuple[SessionInfo, ...]
    active: str | None


@dataclass(frozen=True, slots=True)
class ToolCallInfo:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it, possibly cut
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    role: Literal["user", "assistant", "tool", "summary"]
    text: str
    created_at: str
    run_id: str | None = None
    tool_calls: tuple[ToolCallInfo, ...] = ()
    tool_call_id: str | None = None  # tool results: the call they answer
    name: str | None = None  # tool results: the tool
    truncated: bool = False  # text was cut for display


@dataclass(frozen=True, slots=True)
class History:
    session_id: str | None  # None: the chat has no session yet
    title: str | None
    entries: tuple[HistoryEntry, ...]
    more: bool  # older messages exist beyond the limit


class ChatDirectory(Protocol):
    """What the runtime tells a WebSocket client about its own chat."""

    def commands(self) -> Sequence[CommandInfo]: ...

    async def sessions(self, chat_id: str) -> SessionList: ...

    async def history(self, chat_id: str, session_id: str | None, limit: int) -> History | None:
        """The active history of `session_id` (None: the chat's current
        session), newest `limit` messages; None if the chat has no such session."""
        ...


@dataclass(frozen=True, slots=True)
class StoredReply:
    """What storage has of the reply to one inbound message."""

    known: bool  # the message was recorded
    text: str | None = None  # its reply, once written
    failed: bool = False  # the reply is the notice of a failed turn
    run_id: str | None = None
    usage: tuple[int, int] | None = None  # (input, output) tokens of the turn
    metadata: dict[str, Any] = field(default_factory=dict)


class ReplyArchive(Protocol):
    """The replies of a channel whose clients come back for them by message
    id (the API channel: retries with an Idempotency-Key, fetches)."""

    async def reply(self, chat_id: str, message_id: str) -> StoredReply: ...

    async def usage(self, run_id: str) -> tuple[int, int] | None:
        """(input, output) tokens of every model call of the turn `run_id`."""
        ...

    async def chats(self, channel: str, prefix: str) -> list[str]:
        """The chat ids of `channel` that start with `prefix` and have a session."""
        ...


class ChatOwners(Protocol):
    """Which principal owns a chat id (the WebSocket channel's clients
    authenticate as principals; docs/PROTOCOL.md "Chat ownership")."""

    async def claim(
        self, chat_id: str, principal: str, legacy_owner: Callable[[Sequence[str]], str]
    ) -> str:
        """The owner of `chat_id`, recorded durably: `principal` when the id
        is new (of two racing claims exactly one wins), the recorded owner
        when it has one, `legacy_owner(senders)` when the chat was used before
        owners were recorded (`senders`: up to two distinct senders of its
        stored messages, possibly none)."""
        ...
