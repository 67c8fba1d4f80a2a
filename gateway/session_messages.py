"""The `SessionMessenger` behind `send_session_message`: one commit puts the
text in the outbox and in the target chat's active session (an assistant
message marked `session_message`), then the channel's sender gets it straight
from the commit. A crash after the commit only leaves an outbox row, which is
sent after the restart: delivered once, recorded once.

The tool's rate window lives in memory; what it would forget across a restart
is read back from the sending session's stored tool results (`earlier_sends`):
only rows from before this messenger was made, and only during its first
window, so a long-running gateway never queries for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta

import structlog

from agent.tools.base import ToolError
from agent.tools.session_message import SENT_PREFIX, SendSessionMessageTool
from gateway.bus import OutboundMessage
from gateway.work import ReplySink, session_base_id
from storage.store import Store

__all__ = ["OutboxMessenger"]

log = structlog.get_logger(__name__)


class OutboxMessenger:
    def __init__(
        self,
        store: Store,
        sink: ReplySink,
        channels: Collection[str],
        history_changed: Callable[[str, str], None],
    ) -> None:
        """`channels`: the running ones; `history_changed`: told about the
        target chat, whose cached history is now behind storage's."""
        self.store = store
        self.sink = sink
        self.channels = frozenset(channels)
        self.history_changed = history_changed
        self.started = datetime.now(UTC)  # the clock stored messages are stamped with

    async def send(self, channel: str, chat_id: str, text: str) -> None:
        if channel not in self.channels:
            raise ToolError(f"channel {channel!r} is not enabled in this gateway")

        def hand_over(queued: tuple[OutboundMessage, int]) -> None:
            self.sink.handoff(*queued)

        message = OutboundMessage(channel, chat_id, text)
        await self.store.transcripts.record_session_message(
            message, session_base_id(channel, chat_id), hand_over
        )
        self.history_changed(channel, chat_id)
        log.info("session_message_sent", target_channel=channel, target_chat=chat_id)

    async def earlier_sends(self, session_id: str, within_secs: float) -> Sequence[float]:
        now = datetime.now(UTC)
        since = now - timedelta(seconds=within_secs)
        if since >= self.started:
            return ()  # the in-memory window has seen every send since
        stamps = await self.store.transcripts.sent_between(
            session_id, SendSessionMessageTool.name, SENT_PREFIX, since, self.started
        )
        return [(now - t).total_seconds() for t in stamps]
