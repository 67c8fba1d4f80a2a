"""send_session_message's rules without a gateway: who may reach which chat,
and the per-session rate window."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from agent.tools.base import ToolContext, ToolError, ToolServices
from agent.tools.session_message import RateWindow, SendArgs, SendSessionMessageTool
from tests.agent.tools.conftest import MakeCtx


@dataclass
class Messenger:
    sent: list[tuple[str, str, str]] = field(default_factory=list)
    fail: bool = False
    earlier: list[float] = field(default_factory=list)  # ages of sends before a restart

    async def send(self, channel: str, chat_id: str, text: str) -> None:
        if self.fail:
            raise ToolError("channel down")
        self.sent.append((channel, chat_id, text))

    async def earlier_sends(self, session_id: str, within_secs: float) -> list[float]:
        return self.earlier


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


async def test_a_failed_send_does_not_count_against_the_limit(make_ctx: MakeCtx) -> None:
    messenger = Messenger(fail=True)
    tool = SendSessionMessageTool(max_per_minute=1)
    ctx = ctx_with(make_ctx, messenger)
    with pytest.raises(ToolError, match="channel down"):
        await tool.run(SendArgs(text="a"), ctx)
    messenger.fail = False
    await tool.run(SendArgs(text="b"), ctx)
    with pytest.raises(ToolError, match="rate limit"):
        await tool.run(SendArgs(text="c"), ctx)


def test_the_window_frees_a_slot_after_a_minute() -> None:
    now = [0.0]
    window = RateWindow(2, clock=lambda: now[0])
    assert window.take("s") is None
    now[0] = 30.0
    assert window.take("s") is None
    assert window.take("s") == pytest.approx(30.0)  # the first send leaves the window then
    assert window.take("other") is None  # per session
    now[0] = 60.0
    assert window.take("s") is None


async def test_sends_from_before_a_restart_count_against_the_limit(make_ctx: MakeCtx) -> None:
    messenger = Messenger(earlier=[50.0, 10.0, 70.0])  # 70 s ago is out of the window
    tool = SendSessionMessageTool(max_per_minute=3)
    ctx = ctx_with(make_ctx, messenger)
    await tool.run(SendArgs(text="a"), ctx)
    with pytest.raises(ToolError, match=r"rate limit: at most 3 .* try again in 10s"):
        await tool.run(SendArgs(text="b"), ctx)
    assert messenger.sent == [("test", "c1", "a")]


def test_the_window_counts_unseen_earlier_sends_with_its_own() -> None:
    now = [100.0]
    window = RateWindow(2, clock=lambda: now[0])
    assert window.take("s", earlier=[59.0]) is None
    assert window.take("s", earlier=[59.0]) == pytest.approx(1.0)
    now[0] = 101.0  # the earlier send has left the window (the messenger ages it)
    assert window.take("s", earlier=[60.0]) is None
