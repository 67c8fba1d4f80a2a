"""The `SessionMessenger` behind `send_session_message`: one commit counts the
send against its quota (storage.sql.access.rate_events: per sender and per target chat),
puts the text in the outbox and in the target chat's active session (an
assistant message marked `session_message`), then the channel's sender gets it
straight from the commit. Over the quota, nothing is stored or sent. A crash
after the commit only leaves an outbox row, which is sent after the restart:
delivered once, recorded once, counted once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import timedelta

import structlog

from agent.tools.base import SendQuota, ToolError
from gateway.bus import OutboundMessage
from gateway.clock import Clock, utc_now
from gateway.work import ReplySink, session_base_id
from storage.sql.access.rate_events import RateLimit
from storage.sql.conversations.sent_messages import Limited, Queued
from storage.store import Store

__all__ = ["SESSION_MESSAGE_RATE", "OutboxMessenger", "rate_keys"]

log = structlog.get_logger(__name__)

SESSION_MESSAGE_RATE = "session_message"  # the rate_events kind


def rate_keys(sender: str, channel: str, chat_id: str) -> tuple[str, str]:
    """What one send counts against: its sender and its target chat (prefixed,
    as a WebSocket sender's id may equal its chat id)."""
    return f"from:{sender}", f"to:{channel}:{chat_id}"


class OutboxMessenger:
    def __init__(
        self,
        store: Store,
        sink: ReplySink,
        channels: Collection[str],
        history_changed: Callable[[str, str], None],
        clock: Clock = utc_now,
    ) -> None:
        """`channels`: the running ones; `history_changed`: told about the
        target chat, whose cached history is now behind storage's; `clock`:
        the wall clock the quota's window goes by."""
        self.store = store
        self.sink = sink
        self.channels = frozenset(channels)
        self.history_changed = history_changed
        self.clock = clock

    async def send(self, channel: str, chat_id: str, text: str, quota: SendQuota) -> float | None:
        if channel not in self.channels:
            raise ToolError(f"channel {channel!r} is not enabled in this gateway")

        def hand_over(outcome: Queued | Limited) -> None:
            if isinstance(outcome, Queued):
                self.sink.handoff(outcome.message, outcome.row_id)

        limit = RateLimit(SESSION_MESSAGE_RATE, quota.limit, timedelta(seconds=quota.window_secs))
        outcome = await self.store.transcripts.record_session_message(
            OutboundMessage(channel, chat_id, text),
            session_base_id(channel, chat_id),
            limit,
            rate_keys(quota.sender, channel, chat_id),
            self.clock(),
            hand_over,
        )
        if isinstance(outcome, Limited):
            log.info(
                "session_message_rate_limited",
                target_channel=channel,
                target_chat=chat_id,
                retry_after_secs=round(outcome.retry_after_secs, 1),
            )
            return outcome.retry_after_secs
        self.history_changed(channel, chat_id)
        log.info("session_message_sent", target_channel=channel, target_chat=chat_id)
        return None
