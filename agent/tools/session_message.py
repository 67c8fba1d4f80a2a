"""`send_session_message`: the agent sends a message to a chat now, mid-turn.

By default to the chat the turn runs in; another chat (or channel) only when
the asking sender is an admin (`ToolServices.admins`) or the target is listed
in `tools.send_session_message.allow_targets` ("channel:chat_id"). Delivery
and recording in the target's history are the `SessionMessenger`'s
(gateway.sessions.messages: the durable outbox). At most `max_per_minute`
messages in any 60 seconds per sender (the principal whose message started
the turn, whichever session or sub-agent sends) and per target chat: the
messenger counts each send in storage with the send itself, so neither `/new`,
`task` children nor a restart resets the count.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from agent.tools.base import SendQuota, Tool, ToolArgs, ToolContext, ToolError

__all__ = ["SENT_PREFIX", "SendSessionMessageTool"]

_WINDOW_SECS = 60.0
SENT_PREFIX = "Sent to "  # a call's result when it sent


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

    def __init__(self, allow_targets: Iterable[str] = (), max_per_minute: int = 6) -> None:
        self.allow_targets = frozenset(allow_targets)
        self.max_per_minute = max_per_minute

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
        quota = SendQuota(f"{ctx.channel}:{ctx.sender_id}", self.max_per_minute, _WINDOW_SECS)
        wait = await messenger.send(channel, chat_id, args.text, quota)
        if wait is not None:
            raise ToolError(
                f"rate limit: at most {self.max_per_minute} session messages per minute "
                f"from one sender or to one chat; try again in {max(wait, 1):.0f}s"
            )
        return f"{SENT_PREFIX}{channel}:{chat_id}."

    def _may_reach(self, ctx: ToolContext, channel: str, chat_id: str) -> bool:
        if f"{channel}:{chat_id}" in self.allow_targets:
            return True
        admins = ctx.services.admins
        return admins is not None and admins.is_admin(ctx.channel, ctx.sender_id)
