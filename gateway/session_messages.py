"""The `SessionMessenger` behind `send_session_message`: one commit puts the
text in the outbox and in the target chat's active session (an assistant
message marked `session_message`), then the channel's sender gets it straight
from the commit. A crash after the commit only leaves an outbox row, which is
sent after the restart: delivered once, recorded once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import structlog

from agent.tools.base import ToolError
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
