"""What the API channel accepts (channels/api/wire.py), and the config check
that keeps it off an exposed host without a key."""

from __future__ import annotations

from typing import Any

import pytest

from channels.api.wire import BadRequest, chunk, parse_request
from gateway.config.loading import ConfigError, parse_config

AGENTS = frozenset({"default", "coder"})


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "picobot", "messages": [{"role": "user", "content": "hi"}], **fields}


def test_the_last_user_message_is_the_new_one() -> None:
    body = _body(
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "second"}, {"type": "text", "text": "part"}],
            },
        ],
        stream=True,
        stream_options={"include_usage": True},
        user="me",
        temperature=0.2,
    )
    asked = parse_request(body, AGENTS)
    assert (asked.text, asked.agent, asked.stream, asked.include_usage, asked.user) == (
        "second\npart", None, True, True, "me",
    )  # fmt: skip
    assert parse_request(_body(model="picobot/coder"), AGENTS).agent == "coder"


@pytest.mark.parametrize(
    ("body", "param", "status"),
    [
        (_body(tools=[{"type": "function"}]), "tools", 400),
        (_body(model="gpt-4o"), "model", 404),
        (_body(model="picobot/nobody"), "model", 404),
        (_body(messages=[]), "messages", 400),
        (_body(messages=[{"role": "assistant", "content": "x"}]), "messages", 400),
        (_body(messages=[{"role": "user", "content": "  "}]), "messages", 400),
        (_body(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), "messages", 400),
        (_body(n=2), "n", 400),
        (_body(user=5), "user", 400),
        ([], None, 400),
    ],
)
def test_refused_requests_name_the_field(body: Any, param: str | None, status: int) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request(body, AGENTS)
    assert (refused.value.param, refused.value.status) == (param, status)


def test_chunks_have_the_shapes_the_sdk_parses() -> None:
    first = chunk("id-1", "picobot", role=True, text="")
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    last = chunk("id-1", "picobot", finish=True)
    assert last["choices"][0]["finish_reason"] == "stop"
    usage = chunk("id-1", "picobot", usage=(3, 4), usage_chunk=True)
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_an_exposed_api_needs_a_key() -> None:
    raw = {"gateway": {"host": "0.0.0.0", "auth_token": ""}, "channels": {"api": {"enabled": True}}}
    raw["channels"]["websocket"] = {"enabled": False}
    with pytest.raises(ConfigError, match=r"channels\.api\.keys"):
        parse_config(raw, {}, source="test")
    raw["channels"]["api"]["keys"] = {"app": "a-long-key-0123456789"}
    parse_config(raw, {}, source="test")
