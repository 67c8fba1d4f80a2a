"""The shared types of the turn pipeline: what the inbound side hands a turn
(`WorkItem`), how a turn ended (`TurnOutcome`), and where replies go
(`ReplySink`). A leaf of the runtime: it imports only `gateway.bus` and the
catalogue's `Locale`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gateway.bus import ChannelEvent, InboundMessage, OutboundMessage
from gateway.i18n import Locale

__all__ = [
    "PAUSED_OUTCOME",
    "MessageTrace",
    "ReplySink",
    "TurnOutcome",
    "WorkItem",
    "session_base_id",
]


def session_base_id(channel: str, chat_id: str) -> str:
    """DESIGN §5: the terminal channel's session id is the chat id itself."""
    return chat_id if channel == "websocket" else f"{channel}:{chat_id}"


class MessageTrace(Protocol):
    """One inbound message's trace while tracing is on (gateway.ops.tracing):
    its root span lasts until the message needs nothing more and every reply
    stamped with it was sent (or given up)."""

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` of the message's root span."""
        ...

    def stamp(self, message: OutboundMessage) -> OutboundMessage:
        """`message` carrying the trace in its metadata: its sends are spans
        of it, and the root waits for them."""
        ...

    def done(self) -> None:
        """Nothing more happens for the message but the sends it stamped."""
        ...


@dataclass(frozen=True, slots=True)
class WorkItem:
    inbox_id: int
    message: InboundMessage
    resume: bool = False  # the user message is already in the transcript
    session_id: str | None = None  # known when resuming
    approval_id: int | None = (
        None  # carries on from this answered approval (gateway.approvals.service)
    )
    # the language of the gateway's own texts in answer to it (gateway.i18n.locales),
    # resolved once by the inbound processor
    locale: Locale = Locale.EN
    # the message's trace, in this process only (None: tracing is off)
    trace: MessageTrace | None = field(default=None, compare=False)

    @property
    def conversation(self) -> tuple[str, str]:
        return self.message.channel, self.message.chat_id


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    ok: bool
    stopped: bool = False
    error: str | None = None
    paused: bool = False  # stopped before tool calls that wait for a person


STOPPED_OUTCOME = TurnOutcome(ok=False, stopped=True, error="the turn was stopped")
# the turn stopped before tool calls that wait for a person (gateway.approvals.service)
PAUSED_OUTCOME = TurnOutcome(ok=True, paused=True)


class ReplySink(Protocol):
    """The outbound side as a turn sees it (implemented by OutboundDispatcher)."""

    def wake(self, channel: str) -> None:
        """New outbox rows were committed for `channel`."""
        ...

    def handoff(self, message: OutboundMessage, row_id: int) -> None:
        """`message` was just committed as outbox row `row_id`."""
        ...

    async def notify(self, event: ChannelEvent) -> None:
        """Typing and streaming signals; best effort."""
        ...
