"""Reading sync_msg items, splitting replies by bytes, classifying send errors."""

from __future__ import annotations

import pytest

from channels.base import PermanentSendError, RateLimited, TransientSendError
from channels.wecom_kf.api import KfApiError, KfHttpError, KfTransportError
from channels.wecom_kf.outbound import send_error, split_bytes
from channels.wecom_kf.parse import KfEvent, KfMessage, MalformedItem, MediaItem, parse_item


def item(msgtype: str = "text", **extra: object) -> dict[str, object]:
    body = {"content": "hi"} if msgtype == "text" else {"media_id": "MID"}
    return {
        "msgid": "m1",
        "open_kfid": "wk1",
        "external_userid": "wm1",
        "send_time": 1700000000,
        "origin": 3,
        "msgtype": msgtype,
        msgtype: body,
        **extra,
    }


def test_text_and_media_messages() -> None:
    assert parse_item(item()) == KfMessage("m1", "wk1", "wm1", 1700000000, 3, "text", "hi")
    for kind in ("image", "voice", "video", "file"):
        parsed = parse_item(item(kind))
        assert isinstance(parsed, KfMessage)
        assert parsed.media == MediaItem(kind, "MID")


def test_other_types_become_a_note_and_events_are_events() -> None:
    link = parse_item(item("link", link={"title": "T", "url": "https://x"}))
    assert isinstance(link, KfMessage)
    assert link.text == "[link: T https://x]"
    event = parse_item(
        {
            "msgid": "e1",
            "origin": 4,
            "msgtype": "event",
            "event": {"event_type": "enter_session", "open_kfid": "wk1", "welcome_code": "W"},
        }
    )
    assert isinstance(event, KfEvent)
    assert (event.event_type, event.details["welcome_code"]) == ("enter_session", "W")


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"msgid": "m1"},
        item(external_userid=""),
        item(origin="three"),
        item("image", image={}),
    ],
)
def test_unreadable_items_raise(bad: dict[str, object]) -> None:
    with pytest.raises(MalformedItem):
        parse_item(bad)


@pytest.mark.parametrize("text", ["a" * 5000, "汉字" * 1500, "word " * 900, "😀" * 700])
def test_split_bytes_keeps_every_part_under_the_limit(text: str) -> None:
    parts = split_bytes(text, 2048)
    assert all(len(p.encode()) <= 2048 for p in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")
    assert len(parts) > 1


def test_a_long_chinese_reply_takes_the_fewest_full_parts() -> None:
    """8,100 bytes of CJK: 4 parts, none under 1,000 bytes but the last (it
    went out as 2046, 2046, 2046, 6 and 1956 bytes, a fifth of the allowance
    spent on two characters)."""
    text = "汉字测试" * 675  # 2,700 characters, 8,100 bytes
    parts = split_bytes(text, 2048)
    sizes = [len(p.encode()) for p in parts]
    assert sum(sizes) == 8100
    assert "".join(parts) == text
    assert len(parts) == 4, sizes
    assert all(1000 <= size <= 2048 for size in sizes[:-1]), sizes


def test_split_bytes_cuts_at_a_break_only_in_the_second_half() -> None:
    early_break = "短句。\n" + "长" * 1000  # a line break 10 bytes in: not worth a part
    parts = split_bytes(early_break, 2048)
    assert parts[0].startswith("短句。\n")  # 10 + 679 × 3 bytes, the break kept inside
    assert [len(p.encode()) for p in parts] == [2047, 3010 - 2047]
    late = "词" * 500 + " " + "词" * 500  # a space at 1,500 bytes: cut there
    assert split_bytes(late, 2048) == ["词" * 500, "词" * 500]
    assert split_bytes("😀", 3) == ["😀"]  # wider than the limit: alone, not lost


def test_split_bytes_leaves_short_text_alone() -> None:
    assert split_bytes("你好", 2048) == ["你好"]


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (KfApiError("kf/send_msg", 95001, "send msg count limit"), PermanentSendError),
        (KfApiError("kf/send_msg", 45009, "api freq"), RateLimited),
        (KfApiError("kf/send_msg", 45033, "concurrency"), RateLimited),
        (KfApiError("kf/send_msg", -1, "system busy"), TransientSendError),
        (KfApiError("kf/send_msg", 40003, "invalid userid"), PermanentSendError),
        (KfHttpError(502, "kf/send_msg"), TransientSendError),
        (KfHttpError(429, "kf/send_msg"), RateLimited),
        (KfHttpError(404, "kf/send_msg"), PermanentSendError),
        (KfTransportError("WeCom kf/send_msg: ClientConnectorError"), TransientSendError),
    ],
)
def test_send_errors_are_classified(exc: Exception, kind: type[Exception]) -> None:
    assert isinstance(exc, KfApiError | KfHttpError | KfTransportError)
    err = send_error(exc, 30.0)
    assert type(err) is kind
    if isinstance(err, RateLimited):
        assert err.retry_after == 30.0


def test_the_window_refusal_says_why() -> None:
    err = send_error(KfApiError("kf/send_msg", 95001, "send msg count limit"), 30.0)
    assert "48 h" in str(err)
    assert "95001" in str(err)
