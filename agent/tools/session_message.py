"""`send_session_message`: the agent sends a message to a chat now, mid-turn.

By default to the chat the turn runs in; another chat (or channel) only when
the asking sender is an admin (`ToolServices.admins`) or the target is listed
in `tools.send_session_message.allow_targets` ("channel:chat_id"). Delivery
and recording in the target's history are the `SessionMessenger`'s
(gateway.session_messages: the durable outbox). At most `max_per_minute`
messages per sending session in any 60 seconds. The window is kept in
memory; the sends of earlier runs of the gateway (which it has not seen) come
from the messenger (`earlier_sends`: the session's stored tool results), so a
restart does not reset it.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

__all__ = ["SENT_PREFIX", "RateWindow", "SendSessionMessageTool"]

_WINDOW_SECS = 60.0
SENT_PREFIX = "Sent to "  # a call's result when it sent: what earlier sends are counted by
_MAX_TRACKED = 4096  # sessions remembered by the window (least recent dropped)


class RateWindow:
    """Sends per key in the last minute, bounded in keys and in entries."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._sent: OrderedDict[str, deque[float]] = OrderedDict()

    def take(self, key: str, earlier: Sequence[float] = ()) -> float | None:
        """Count one send for `key`; None if allowed, else seconds until one is.
        `earlier`: ages (seconds) of sends this window never saw (before a restart)."""
        now = self.clock()
        times = self._sent.setdefault(key, deque())
        self._sent.move_to_end(key)
        while times and now - times[0] >= _WINDOW_SECS:
            times.popleft()
        ages = [a for a in earlier if a < _WINDOW_SECS]
        if len(times) + len(ages) >= self.limit:
            oldest = max([*ages, *([now - times[0]] if times else [])])
            return _WINDOW_SECS - oldest
        times.append(now)
        while len(self._sent) > _MAX_TRACKED:
            self._sent.popitem(last=False)
        return None

    def give_back(self, key: str) -> None:
        """The send counted by the last `take` did not happen."""
        times = self._sent.get(key)
        if times:
            times.pop()


class SendArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=20_000)
    channel: str | None = None
    chat_id: str | None = None


class SendSessionMessageTool(Tool[SendArgs]):
    name = "send_session_message"
    description = (
        "Send a message now, before your reply: to this chat, or to another (channel, "
        "chat_id) when allowed. It joins that chat's history."
    )
    Args = SendArgs

    def __init__(
        self,
        allow_targets: Iterable[str] = (),
        max_per_minute: int = 6,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allow_targets = frozenset(allow_targets)
        self.window = RateWindow(max_per_minute, clock)

    async def run(self, args: SendArgs, ctx: ToolContext) -> str:
        messenger = ctx.services.messenger
        if messenger is None:
            raise ToolError("sending messages is not available in this gateway")
        channel = args.channel or ctx.channel
        chat_id = args.chat_id or (ctx.chat_id if channel == ctx.channel else None)
        if chat_id is None:
            raise ToolError("chat_id is required when channel names another channel")
        if (channel, chat_id) != (ctx.channel, ctx.chat_id) and not self._may_reach(
            ctx, channel, chat_id
        ):
            raise ToolError(
                f"not allowed to message {channel}:{chat_id}: only admins may message other "
                "chats, or targets listed in tools.send_session_message.allow_targets"
            )
        earlier = await messenger.earlier_sends(ctx.session_id, _WINDOW_SECS)
        wait = self.window.take(ctx.session_id, earlier)
        if wait is not None:
            raise ToolError(
                f"rate limit: at most {self.window.limit} session messages per minute; "
                f"try again in {wait:.0f}s"
            )
        try:
            await messenger.send(channel, chat_id, args.text)
        except BaseException:
            self.window.give_back(ctx.session_id)
            raise
        return f"{SENT_PREFIX}{channel}:{chat_id}."

    def _may_reach(self, ctx: ToolContext, channel: str, chat_id: str) -> bool:
        if f"{channel}:{chat_id}" in self.allow_targets:
            return True
        admins = ctx.services.admins
        return admins is not None and admins.is_admin(ctx.channel, ctx.sender_id)
