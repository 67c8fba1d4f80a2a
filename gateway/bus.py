"""Message types and the bus between channels and the runtime.

A leaf module: it imports no project module. Channels publish
`InboundMessage`s with `MessageBus.submit`, which returns only once the gateway
has durably recorded the message (or recognised it as a duplicate), so a
channel can acknowledge its platform after `submit` returns and not before.

Every inbound message carries a `TurnRequest`: who asked (a chat, a scheduled
job, a sub-agent, the web UI), which agent answers, which session and where
the reply goes. It is stored with the inbox row, so a turn recovered after a
crash runs exactly as it was asked for. Control data never travels in
`metadata`, which holds only what a platform said about the message.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "CHAT_REQUEST",
    "FAILED_TURN",
    "ApprovalAsk",
    "BusClosed",
    "ChannelEvent",
    "ChatType",
    "Decision",
    "Delivery",
    "EventKind",
    "InboundMessage",
    "MediaKind",
    "MediaRef",
    "MessageBus",
    "NoSuchChannel",
    "Origin",
    "OutboundMessage",
    "Receipt",
    "SessionPolicy",
    "ToolActivity",
    "ToolStatus",
    "TurnRequest",
    "button_command",
    "is_failed_turn",
    "make_storable",
    "new_idempotency_key",
    "parse_button",
    "reply_handle",
    "storable",
]


class BusClosed(Exception):
    """Raised by `submit` once the gateway has stopped taking messages."""


class NoSuchChannel(ValueError):
    """A message for a channel that is not enabled (e.g. a scheduled job's
    target): a fact of the config, said in one line, never a traceback."""


class ChatType(StrEnum):
    DIRECT = "direct"
    GROUP = "group"


class MediaKind(StrEnum):
    IMAGE = "image"
    FILE = "file"
    AUDIO = "audio"
    VIDEO = "video"


class Receipt(StrEnum):
    ACCEPTED = "accepted"  # recorded; a reply will follow
    DUPLICATE = "duplicate"  # seen before; nothing new happens
    # could not be recorded (poison input): kept in the dead_letters table, never
    # answered; the channel moves its cursor past it as it would for ACCEPTED
    DEAD_LETTER = "dead_letter"
    # recorded, but the chat's queue is full (gateway.max_pending_per_session):
    # not answered beyond a notice saying so; the channel moves on as for ACCEPTED
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class MediaRef:
    kind: MediaKind
    path: str  # local file, already downloaded by the channel
    mime_type: str | None = None
    name: str | None = None


class Origin(StrEnum):
    """Who asked for the turn."""

    CHAT = "chat"  # a person in a channel
    SCHEDULER = "scheduler"  # an agent_task / silent_agent_task job
    SUBAGENT = "subagent"
    WEB = "web"


class SessionPolicy(StrEnum):
    ACTIVE = "active"  # the conversation's active session
    FRESH = "fresh"  # a new session, made the active one


class Delivery(StrEnum):
    REPLY = "reply"  # the reply goes to the chat
    FAILURES_ONLY = "failures_only"  # nothing on success; a failure notice to `notify_chat_id`


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What a turn was asked to do; stored with the inbox row it came with."""

    origin: Origin = Origin.CHAT
    agent: str | None = None  # agents.<name>; None: the channel's agent
    session: SessionPolicy = SessionPolicy.ACTIVE
    delivery: Delivery = Delivery.REPLY
    notify_chat_id: str | None = None  # FAILURES_ONLY: where the notice goes (None: the chat)
    system_prompt: str | None = None  # stored as a marked system message before the question
    job_id: str | None = None  # the scheduled job that asked, named in failure notices
    max_tokens: int | None = None  # a scheduled run's own token cap (below the agent's)

    def to_dict(self) -> dict[str, str]:
        """The stored form: only what differs from a plain chat message."""
        if self is CHAT_REQUEST:  # nearly every message: nothing to store
            return {}
        out: dict[str, str] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None and value != getattr(CHAT_REQUEST, name):
                out[name] = str(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnRequest:
        if not data:
            return CHAT_REQUEST
        return cls(
            origin=Origin(data.get("origin", Origin.CHAT)),
            agent=data.get("agent"),
            session=SessionPolicy(data.get("session", SessionPolicy.ACTIVE)),
            delivery=Delivery(data.get("delivery", Delivery.REPLY)),
            notify_chat_id=data.get("notify_chat_id"),
            system_prompt=data.get("system_prompt"),
            job_id=data.get("job_id"),
            max_tokens=_int_or_none(data.get("max_tokens")),
        )


CHAT_REQUEST: Final = TurnRequest()


def _int_or_none(value: Any) -> int | None:
    """A stored number (`to_dict` writes every value as text)."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class InboundMessage:
    channel: str
    chat_id: str
    sender_id: str
    text: str
    message_id: str  # the platform's id: the dedup key with `channel`
    chat_type: ChatType = ChatType.DIRECT
    media: tuple[MediaRef, ...] = ()
    reply_to: str | None = None  # quoted text the user replied to, as context
    mentions: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)  # platform facts, never control
    request: TurnRequest = CHAT_REQUEST
    received_at: datetime = field(default_factory=_now)
    # The platform's handle to reply to this message when it differs from the
    # dedup key `message_id` (Feishu: event id vs. om_ message id).
    reply_ref: str | None = None
    # Other stable ids of the same sender that `allow_from` and `gateway.admins`
    # may name (Telegram "@username", Feishu user_id and union_id).
    sender_aliases: tuple[str, ...] = ()
    # The message is aimed at the bot: it @mentions it, replies to one of its
    # messages or is a command for it. What `groups.require_mention` checks in
    # a group chat (a direct message is always for the bot).
    addressed: bool = False
    # The sender's language as the platform tells it (Telegram `from.language_code`:
    # "zh-hans", "en"); None when it says nothing. The gateway's own texts follow it
    # under `locale: "auto"` (gateway.i18n.locales).
    language: str | None = None
    # Resolved by the gateway once the message is durable (or known duplicate).
    receipt: asyncio.Future[Receipt] | None = field(default=None, compare=False, repr=False)


def storable(text: str) -> str:
    """`text` as valid Unicode: a lone surrogate (which UTF-8, hence SQLite and
    JSON on the wire, cannot carry) becomes U+FFFD; a surrogate pair that a
    platform sent as two escapes becomes the character it encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _storable_value(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): _storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_value(v) for v in value]
    return value


def make_storable(message: InboundMessage) -> None:
    """Every text field of `message` made storable in place (the bus boundary)."""
    message.chat_id = storable(message.chat_id)
    message.sender_id = storable(message.sender_id)
    message.text = storable(message.text)
    message.message_id = storable(message.message_id)
    if message.reply_to is not None:
        message.reply_to = storable(message.reply_to)
    if message.reply_ref is not None:
        message.reply_ref = storable(message.reply_ref)
    message.mentions = tuple(storable(m) for m in message.mentions)
    message.sender_aliases = tuple(storable(a) for a in message.sender_aliases)
    if message.language is not None:
        message.language = storable(message.language)
    message.metadata = _storable_value(message.metadata)
    message.media = tuple(
        MediaRef(m.kind, m.path, m.mime_type, storable(m.name) if m.name else m.name)
        for m in message.media
    )


def reply_handle(message: InboundMessage) -> str:
    """What replies to `message` carry as `reply_to_message_id`."""
    return message.reply_ref or message.message_id


def new_idempotency_key() -> str:
    """A key no other outbound message ever had: random, not derived from a
    row id (ids repeat after a restore, on a fresh database, across gateways)."""
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    channel: str
    chat_id: str
    text: str
    outbox_id: int | None = None  # the durable row; stable across retries
    reply_to_message_id: str | None = None  # platform id of the message answered
    session_id: str | None = None
    attempt: int = 1
    run_id: str | None = None  # the turn that wrote it: a channel matches its stream by it
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None  # when its outbox row was written (UTC)
    # What the platform deduplicates on (Feishu `uuid`, WeChat `client_id`):
    # stored with the outbox row, so only the retries of that row repeat it.
    idempotency_key: str = field(default_factory=new_idempotency_key, compare=False)
    # Files to deliver with (after) the text, in order; paths the channel can read
    # on every retry (the gateway keeps its own copy: gateway.delivery.files).
    media: tuple[MediaRef, ...] = ()
    # the language ("zh-CN", "en") of what the gateway adds at send time (the
    # late note): the one of the message answered; None: the channel's
    locale: str | None = None


class EventKind(StrEnum):
    WORKING = "working"  # a turn started for this chat
    IDLE = "idle"  # the turn ended
    DELTA = "delta"  # streamed text of the reply in progress
    TOOL = "tool"  # a tool call started or ended (`ChannelEvent.tool`, `tool_calls`)


class ToolStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ToolActivity:
    """One tool call of a turn as the chat may see it: never its result."""

    call_id: str
    name: str
    summary: str  # the arguments on one short line, secrets masked
    status: ToolStatus = ToolStatus.RUNNING
    secs: float | None = None  # once ended


@dataclass(frozen=True, slots=True)
class ChannelEvent:
    """Best-effort, non-durable signal to a channel (typing, streaming, tool progress)."""

    kind: EventKind
    channel: str
    chat_id: str
    session_id: str
    run_id: str
    text: str = ""
    reply_to_message_id: str | None = None
    # TOOL: the call that changed (None when a channel that cannot edit gets the
    # turn's calls at once), and every call of the turn so far, in call order.
    tool: ToolActivity | None = None
    tool_calls: tuple[ToolActivity, ...] = ()


class MessageBus:
    """Bounded inbound queue with durable receipts and real close semantics.

    `submit` waits for room (at most `inbound_capacity` messages queued), then
    for the receipt. `close` refuses new messages; the consumer still gets
    every message queued before it, then `None` from `get`.
    """

    def __init__(self, inbound_capacity: int = 1024) -> None:
        # the queue itself is unbounded so that close() can always append its
        # sentinel; the capacity is enforced by `_room`
        self._queue: asyncio.Queue[InboundMessage | None] = asyncio.Queue()
        self._room = asyncio.Semaphore(inbound_capacity)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def depth(self) -> int:
        """Messages queued and not yet taken."""
        return self._queue.qsize() - (1 if self._closed and self._queue.qsize() else 0)

    def close(self) -> None:
        """Refuse new messages; those already queued are still processed."""
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(None)

    async def submit(self, message: InboundMessage) -> Receipt:
        """Queue `message` and wait until it is durably recorded (or dead-lettered).
        Its text fields are made storable first (`storable`)."""
        self._check_open()
        await self._room.acquire()
        try:
            self._check_open()  # it may have closed while we waited for room
        except BusClosed:
            self._room.release()
            raise
        make_storable(message)
        message.receipt = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(message)
        return await message.receipt

    def _check_open(self) -> None:
        if self._closed:
            raise BusClosed("the gateway is shutting down")

    async def get(self) -> InboundMessage | None:
        """The next message; None once the bus is closed and drained."""
        message = await self._queue.get()
        if message is None:
            self._queue.put_nowait(None)  # every later get() ends too
            return None
        self._room.release()
        return message

    def get_nowait(self) -> InboundMessage | None:
        """The next message if one is queued now; None when empty or closed."""
        try:
            message = self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if message is None:
            self._queue.put_nowait(None)  # nothing is queued after the sentinel
            return None
        self._room.release()
        return message


# -- a failed turn's notice -------------------------------------------------------
# The reply to a turn that failed (the provider down, no key) tells the asker
# so in words; its metadata says so too (stored with the outbox row), so a
# channel that can show an error as one (the web UI) does without reading the
# text. `{**FAILED_TURN}` in `OutboundMessage.metadata`; `is_failed_turn` reads it.

FAILED_TURN: Final[Mapping[str, Any]] = {"failed_turn": True}


def is_failed_turn(message: OutboundMessage) -> bool:
    return message.metadata.get("failed_turn") is True


# -- approval requests (gateway.approvals.service, docs/approvals.md) -----------------
# An outbound message that asks a person to approve held tool calls carries an
# `ApprovalAsk` in its metadata (the only metadata key this section owns). A
# channel with buttons shows Approve / Deny (labelled in the chat's language by
# the gateway: channels have no i18n); a press comes back as the plain
# command text `/approve N` or `/deny N`, so it passes the same inbox, access
# policy and command path as a typed command, and the gateway decides who may
# answer. Channels never decide approvals themselves.

_APPROVAL_KEY = "approval"


class Decision(StrEnum):
    APPROVE = "approve"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class ApprovalAsk:
    approval_id: int
    tools: tuple[str, ...]  # the held calls' tool names
    # the chat is a group: for a platform whose button press does not say so (Feishu)
    group: bool = False
    # the buttons' labels, in the chat's language (gateway.i18n)
    approve_label: str = "Approve"
    deny_label: str = "Deny"

    def metadata(self) -> dict[str, Any]:
        ask = {
            "id": self.approval_id,
            "tools": list(self.tools),
            "group": self.group,
            "labels": [self.approve_label, self.deny_label],
        }
        return {_APPROVAL_KEY: ask}

    @staticmethod
    def of(message: OutboundMessage) -> ApprovalAsk | None:
        raw = message.metadata.get(_APPROVAL_KEY)
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), int):
            return None
        tools = raw.get("tools")
        names = tuple(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else ()
        labels = raw.get("labels")  # absent from a request queued by an older picobot
        if not (
            isinstance(labels, list)
            and len(labels) == 2
            and all(isinstance(x, str) and x.strip() for x in labels)
        ):
            labels = ["Approve", "Deny"]
        return ApprovalAsk(raw["id"], names, raw.get("group") is True, labels[0], labels[1])


def button_command(decision: Decision, approval_id: int) -> str:
    """The callback payload of a button, and the command text it becomes."""
    return f"/{decision.value} {approval_id}"


_BUTTON = re.compile(r"^/(approve|deny) (\d{1,18})$")


def parse_button(payload: str) -> str | None:
    """The command text of a button payload; None for anything we did not send."""
    return payload if _BUTTON.match(payload) else None
