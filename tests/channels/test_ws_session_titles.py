"""A session is named after its first message (gateway.turns.opener
`default_title`), as the WebSocket `sessions` query shows it; `/new TITLE` and
`/rename` name it themselves and are kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.turns.opener import TITLE_MAX_CHARS, default_title
from tests.fakes.openai_server import FakeOpenAI
from tests.support import WsClient, make_config, running_gateway, ws_client


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("  plan   a trip\nto Lyon  ", "plan a trip"),
        ("[Replying to: earlier words]\nwhat about Paris?", "what about Paris?"),
        ("[2 messages arrived while you were busy; answer them together.]\n\n[1] hi", "hi"),
        ("[Attached image: image at /m/x.png]", None),
        ("", None),
        (
            "帮我写一封给房东的邮件，说明下个月的房租会晚几天交" * 2,
            ("帮我写一封给房东的邮件，说明下个月的房租会晚几天交" * 2)[:39] + "…",
        ),
        ("a" * 100, "a" * (TITLE_MAX_CHARS - 1) + "…"),
    ],
)
def test_the_default_title_is_the_first_line_of_the_users_words(
    text: str, title: str | None
) -> None:
    got = default_title(text)
    assert got == title  # Chinese is cut by characters, not bytes
    assert got is None or len(got) <= TITLE_MAX_CHARS


async def _sessions(client: WsClient) -> dict[str, Any]:
    await client.ws.send(json.dumps({"type": "sessions", "id": "q"}))
    return await client.recv_type("sessions")


def _active(listing: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in listing["sessions"] if s["id"] == listing["active"])


async def test_a_session_is_named_after_its_first_message_unless_named(
    home: Path, llm: FakeOpenAI
) -> None:
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        ws_client(gw, "web-titles") as client,
    ):
        await client.ask("Plan a weekend in Lyon with a small budget, please")
        await client.ask("and what about the trains?")  # a later message changes nothing
        assert (
            _active(await _sessions(client))["title"] == "Plan a weekend in Lyon with a small bud…"
        )

        await client.ask("/rename Lyon")
        await client.ask("more ideas")
        assert _active(await _sessions(client))["title"] == "Lyon"

        await client.ask("/new Kept title")
        await client.ask("first words of the second session")
        assert _active(await _sessions(client))["title"] == "Kept title"

        await client.ask("/new")
        await client.ask("第三个会话的第一句话")
        assert _active(await _sessions(client))["title"] == "第三个会话的第一句话"
