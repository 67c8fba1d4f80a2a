"""send_session_message's rules without a gateway: who may reach which chat,
and the quota it hands the messenger (counted there, in storage: see
tests/gateway/test_session_messenger.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from agent.tools.base import SendQuota, ToolContext, ToolError, ToolServices
from agent.tools.session_message import SendArgs, SendSessionMessageTool
from tests.agent.tools.conftest import MakeCtx


@dataclass
class Messenger:
    sent: list[tuple[str, str, str]] = field(default_factory=list)
    quotas: list[SendQuota] = field(default_factory=list)
    fail: bool = False
    wait: float | None = None  # what a send over the quota answers

    async def send(self, channel: str, chat_id: str, text: str, quota: SendQuota) -> float | None:
        self.quotas.append(quota)
        if self.fail:
            raise ToolError("channel down")
        if self.wait is not None:
            return self.wait
        self.sent.append((channel, chat_id, text))
        return None


class Admins:
    def is_admin(self, channel: str, sender_id: str) -> bool:
        return (channel, sender_id) == ("test", "root")


def ctx_with(make_ctx: MakeCtx, messenger: Messenger, sender: str = "u1") -> ToolContext:
    ctx = make_ctx()
    return replace(
        ctx, sender_id=sender, services=ToolServices(messenger=messenger, admins=Admins())
    )


async def test_the_current_chat_is_the_default_and_always_allowed(make_ctx: MakeCtx) -> None:
    messenger = Messenger()
    out = await SendSessionMessageTool().run(SendArgs(text="hi"), ctx_with(make_ctx, messenger))
    assert out == "Sent to test:c1."
    assert messenger.sent == [("test", "c1", "hi")]


async def test_other_chats_need_an_admin_or_an_allowed_target(make_ctx: MakeCtx) -> None:
    messenger = Messenger()
    tool = SendSessionMessageTool(allow_targets=["telegram:9"])
    other = SendArgs(text="x", channel="telegram", chat_id="8")
    with pytest.raises(ToolError, match="not allowed to message telegram:8"):
        await tool.run(other, ctx_with(make_ctx, messenger))
    await tool.run(other, ctx_with(make_ctx, messenger, sender="root"))
    await tool.run(
        SendArgs(text="y", channel="telegram", chat_id="9"), ctx_with(make_ctx, messenger)
    )
    assert messenger.sent == [("telegram", "8", "x"), ("telegram", "9", "y")]
    with pytest.raises(ToolError, match="chat_id is required"):
        await tool.run(SendArgs(text="z", channel="telegram"), ctx_with(make_ctx, messenger))


async def test_the_quota_is_the_senders_whoever_sends_for_them(make_ctx: MakeCtx) -> None:
    messenger = Messenger()
    tool = SendSessionMessageTool(max_per_minute=4)
    ctx = ctx_with(make_ctx, messenger, sender="u9")
    child = replace(ctx, session_id="task:s1:call-1")  # a sub-agent keeps its parent's sender
    await tool.run(SendArgs(text="a"), ctx)
    await tool.run(SendArgs(text="b"), child)
    assert messenger.quotas == [SendQuota("test:u9", 4, 60.0)] * 2


async def test_a_send_over_the_quota_is_a_rate_limit_error(make_ctx: MakeCtx) -> None:
    messenger = Messenger(wait=9.6)
    tool = SendSessionMessageTool(max_per_minute=3)
    with pytest.raises(
        ToolError, match=r"^rate limit: at most 3 session messages per minute .* 10s$"
    ):
        await tool.run(SendArgs(text="a"), ctx_with(make_ctx, messenger))
    assert messenger.sent == []


async def test_a_failing_send_is_the_messengers_error(make_ctx: MakeCtx) -> None:
    messenger = Messenger(fail=True)
    with pytest.raises(ToolError, match="channel down"):
        await SendSessionMessageTool().run(SendArgs(text="a"), ctx_with(make_ctx, messenger))
