"""/usage and /limits through a whole gateway: a user sees their spending
against their budget, only an admin changes budgets, a change is stored (it
outlives a restart) and applies to the next message; the admin chat hears
once when a budget is used up."""

from __future__ import annotations

from pathlib import Path

from gateway.i18n import Locale, Msg, tr
from tests.e2e.test_budgets import CALL, exceeded_start
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.support import ask_on, make_config, running_gateway

EN = {"language": "en"}


async def test_usage_limits_and_the_admin_notice(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"admins": ["rec:root"]},
        limits={
            "sender": {"daily_tokens": 500},
            "admin_chat": {"channel": "rec", "chat_id": "admins"},
        },
    )
    for _ in range(10):
        llm.add_text("fine", usage=CALL)
    channel = RecordingChannel()
    async with running_gateway(loaded, extra_channels=[channel]):
        assert await ask_on(channel, "alice", "hello", sender_id="alice", **EN) == "fine"
        usage = await ask_on(channel, "alice", "/usage", sender_id="alice", **EN)
        assert "rec:alice: today 300 tokens" in usage
        assert "300 tokens of 500 tokens (60%)" in usage
        assert await ask_on(channel, "alice", "/usage rec:bob", sender_id="alice", **EN) == tr(
            Locale.EN, Msg.USAGE_ONLY_ADMINS
        )
        denied = await ask_on(
            channel,
            "alice",
            "/limits set sender rec:alice daily_tokens 9000",
            sender_id="alice",
            **EN,
        )
        assert denied == tr(Locale.EN, Msg.LIMITS_ONLY_ADMINS)

        assert await ask_on(channel, "alice", "again", sender_id="alice", **EN) == "fine"  # 600
        admin_notes = list(channel.texts("admins"))
        assert len(admin_notes) == 1
        assert "rec:alice" in admin_notes[0]
        assert "500 tokens" in admin_notes[0]
        refused = await ask_on(channel, "alice", "more", sender_id="alice", **EN)
        assert refused.startswith(exceeded_start(Locale.EN))
        assert len(llm.requests) == 2

        set_reply = await ask_on(
            channel,
            "root",
            "/limits set sender rec:alice daily_tokens 2000",
            sender_id="root",
            **EN,
        )
        assert set_reply == tr(
            Locale.EN, Msg.LIMITS_SET, scope="sender", key="rec:alice", field="daily_tokens",
            value="2,000",
        )  # fmt: skip
        assert "rec:alice" in await ask_on(
            channel, "root", "/usage rec:alice", sender_id="root", **EN
        )

    channel = RecordingChannel()
    async with running_gateway(loaded, extra_channels=[channel]):  # the change is stored
        assert await ask_on(channel, "alice", "more", sender_id="alice", **EN) == "fine"
        listed = await ask_on(channel, "alice", "/limits", sender_id="alice", **EN)
        assert "sender rec:alice: daily_tokens = 2,000" in listed
        bad = await ask_on(
            channel, "root", "/limits set sender rec:alice daily_tokns 1", sender_id="root", **EN
        )
        assert bad == tr(Locale.EN, Msg.LIMITS_USAGE)
        for wrong in ("sender rec:alice daily_tokens inf", "total rec:alice daily_tokens 5"):
            refused = await ask_on(channel, "root", f"/limits set {wrong}", sender_id="root", **EN)
            assert refused == tr(Locale.EN, Msg.LIMITS_USAGE)
        cleared = await ask_on(
            channel, "root", "/limits clear sender rec:alice", sender_id="root", **EN
        )
        assert cleared == tr(
            Locale.EN, Msg.LIMITS_CLEARED, scope="sender", key="rec:alice", count=1
        )
        refused = await ask_on(channel, "alice", "and more", sender_id="alice", **EN)
        assert refused.startswith(exceeded_start(Locale.EN))  # back to 500: 900 spent
    assert len(llm.requests) == 3
