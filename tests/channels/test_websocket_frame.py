"""A WebSocket frame's text: orjson's, and json's for what orjson refuses."""

from __future__ import annotations

import json

from channels.websocket import _frame


def test_a_frame_is_json_with_its_text_unescaped() -> None:
    text = _frame("message", id=7, text="你好 ünï", earlier=False, secs=0.25)
    assert json.loads(text) == {
        "type": "message",
        "id": 7,
        "text": "你好 ünï",
        "earlier": False,
        "secs": 0.25,
    }
    assert "你好 ünï" in text


def test_what_orjson_refuses_is_written_as_json_writes_it() -> None:
    """An integer beyond 64 bits, a key that is not a string."""
    assert json.loads(_frame("x", n=2**70, m={1: "a"})) == {
        "type": "x",
        "n": 2**70,
        "m": {"1": "a"},
    }
