"""Feishu envelopes and message content → text, mentions and media keys."""

from __future__ import annotations

import json

import pytest

from channels.feishu.parse import (
    EventFormatError,
    content_text,
    parse_envelope,
    parse_mentions,
    parse_message,
)
from gateway.bus import ChatType, MediaKind
from tests.fakes.feishu_server import mention, message_event


def test_v2_envelope_fields() -> None:
    event = message_event("x", event_id="ev1")
    env = parse_envelope(event)
    assert (env.event_id, env.event_type) == ("ev1", "im.message.receive_v1")
    assert env.token == "verify-token"


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"event": {}},
        {"schema": "2.0", "header": {}, "event": {}},
        {"header": {"event_id": "x"}},
    ],
)
def test_bad_envelopes(body: object) -> None:
    with pytest.raises(EventFormatError):
        parse_envelope(body)


def test_placeholders_resolved_longest_first_and_bot_removed() -> None:
    mentions = [mention(f"@_user_{i}", f"ou_{i}", f"N{i}") for i in range(1, 11)]
    mentions[0] = mention("@_user_1", "ou_bot", "bot")
    event = message_event(
        "@_user_1 ping @_user_10 and @_user_2", chat_type="group", mentions=mentions
    )
    parsed = parse_message(event["event"], "ou_bot")
    assert parsed.text == "ping @N10 and @N2"
    assert parsed.bot_mentioned
    assert parsed.chat_type is ChatType.GROUP


def test_without_bot_id_nobody_counts_as_the_bot() -> None:
    event = message_event("@_user_1 hi", mentions=[mention("@_user_1", "ou_bot", "bot")])
    parsed = parse_message(event["event"], None)
    assert not parsed.bot_mentioned
    assert parsed.text == "@bot hi"


@pytest.mark.parametrize("wrapped", [True, False])
def test_post_with_and_without_language_key(wrapped: bool) -> None:
    body = {
        "title": "Report",
        "content": [
            [
                {"tag": "text", "text": "see "},
                {"tag": "a", "text": "docs", "href": "https://x.test"},
            ],
            [{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " look"}],
            [{"tag": "img", "image_key": "img_1"}],
            [{"tag": "code_block", "language": "py", "text": "print(1)"}],
        ],
    }
    content = {"zh_cn": body} if wrapped else body
    mentions = tuple(parse_mentions([mention("@_user_1", "ou_bot", "bot")]))
    text, media = content_text("post", content, mentions, "ou_bot")
    assert text.splitlines() == [
        "Report",
        "see docs (https://x.test)",
        "look",
        "[image]",
        "```py",
        "print(1)",
        "```",
    ]
    assert [(m.kind, m.key, m.resource_type) for m in media] == [
        (MediaKind.IMAGE, "img_1", "image")
    ]


def test_file_audio_and_unknown_types() -> None:
    text, media = content_text("file", {"file_key": "f1", "file_name": "a.pdf"})
    assert text == "[file: a.pdf]"
    assert media[0].resource_type == "file"
    assert content_text("audio", {"file_key": "f2", "duration": 3})[1][0].kind is MediaKind.AUDIO
    assert content_text("sticker", {"file_key": "s"}) == ("[sticker]", ())


def test_content_must_be_json() -> None:
    event = message_event("x")
    event["event"]["message"]["content"] = "{not json"
    with pytest.raises(EventFormatError):
        parse_message(event["event"], None)


def test_parent_and_ids_are_kept() -> None:
    event = message_event("x", parent_id="om_parent", sender="ou_s")
    parsed = parse_message(event["event"], None)
    assert parsed.parent_id == "om_parent"
    assert parsed.sender_ids == ("ou_s", "u_ou_s", "on_x")
    assert json.loads(parsed.raw_content) == {"text": "x"}


def test_an_interactive_message_in_the_simplified_event_form_gives_its_text() -> None:
    content = {
        "title": "Deploy report",
        "elements": [
            [{"tag": "text", "text": "Build "}, {"tag": "text", "text": "passed"}],
            [{"tag": "a", "text": "logs", "href": "https://ci.example/1"}],
        ],
    }
    text, media = content_text("interactive", content)
    assert text == "Deploy report\nBuild passed\nlogs (https://ci.example/1)"
    assert media == ()


def test_an_interactive_message_as_card_json_gives_every_visible_string() -> None:
    content = {
        "header": {"title": {"tag": "plain_text", "content": "Approval"}},
        "elements": [
            {"tag": "markdown", "content": "**Leave** request from Bob"},
            {"tag": "div", "text": {"tag": "lark_md", "content": "3 days"}},
            {
                "tag": "action",
                "actions": [
                    {"tag": "button", "text": {"tag": "plain_text", "content": "Approve"}},
                ],
            },
        ],
    }
    text, _ = content_text("interactive", content)
    assert text == "Approval\n**Leave** request from Bob\n3 days\nApprove"


def test_card_json_2_0_body_elements_and_an_empty_card() -> None:
    content = {"schema": "2.0", "body": {"elements": [{"tag": "markdown", "content": "hi"}]}}
    assert content_text("interactive", content)[0] == "hi"
    assert content_text("interactive", {"elements": []})[0] == "[card]"


def test_shares_name_what_was_shared() -> None:
    assert content_text("share_chat", {"chat_id": "oc_x"})[0] == "[shared a chat: oc_x]"
    assert content_text("share_user", {"user_id": "ou_y"})[0] == "[shared a contact: ou_y]"
    assert content_text("merge_forward", {"content": "Merged"})[0] == "[merged forward]"


def test_a_hostile_deeply_nested_card_is_cut_not_recursed_forever() -> None:
    node: dict[str, object] = {"tag": "markdown", "content": "deep"}
    for _ in range(5000):
        node = {"tag": "column", "elements": [node]}
    text, _ = content_text("interactive", {"elements": [node]})
    assert text == "[card]"
