"""The access policy on its own: order of the checks, groups, ids; the reply
limiter over a real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from channels.base import ChannelSettings, GroupAccess
from gateway.access.gate import ReplyLimiter
from gateway.access.pairing import ALPHABET, new_code, parse_code, parse_who
from gateway.access.policy import AccessPolicy, Reason
from gateway.bus import ChatType, InboundMessage, Origin, TurnRequest
from storage.sqlite.db import Database
from storage.store import Store


def message(sender: str = "42", **fields: Any) -> InboundMessage:
    values: dict[str, Any] = {
        "channel": "telegram",
        "chat_id": sender,
        "sender_id": sender,
        "text": "hi",
        "message_id": "m1",
        **fields,
    }
    return InboundMessage(**values)


def policy(**settings: Any) -> AccessPolicy:
    return AccessPolicy(
        ["telegram:1", "telegram:@Boss"],
        {"telegram": ChannelSettings(enabled=True, **settings)},
    )


def test_admins_come_before_allow_from_and_allow_from_before_pairings() -> None:
    p = policy(allow_from=["7"])
    assert p.judge(message("1")).reason is Reason.ADMIN
    assert p.judge(message("1")).admin
    assert p.judge(message("7")).reason is Reason.ALLOW_FROM
    assert p.judge(message("42")).reason is Reason.UNKNOWN_SENDER
    assert p.judge(message("42"), paired=True).reason is Reason.PAIRED
    # only a sender no rule admits needs the pairing lookup
    assert [p.needs_pairing(message(s)) for s in ("1", "7", "42")] == [False, False, True]


def test_an_empty_allow_from_still_admits_admins_and_pairings() -> None:
    p = policy(allow_from=[])
    assert p.judge(message("1")).admitted
    assert not p.judge(message("7")).admitted
    assert p.judge(message("7"), paired=True).admitted


def test_aliases_match_and_usernames_ignore_case() -> None:
    p = policy(allow_from=["@Alice"])
    assert p.judge(message("99", sender_aliases=("@alice",))).reason is Reason.ALLOW_FROM
    assert p.judge(message("98", sender_aliases=("@boss",))).reason is Reason.ADMIN
    assert p.is_admin("telegram", "1")
    assert not p.is_admin("feishu", "1")  # an admin is one channel's sender


def test_turns_the_gateway_asks_for_itself_are_not_judged() -> None:
    scheduled = message("job", request=TurnRequest(origin=Origin.SCHEDULER))
    assert policy(allow_from=[]).judge(scheduled).reason is Reason.INTERNAL


@pytest.mark.parametrize(
    ("groups", "chat_id", "addressed", "reason"),
    [
        (GroupAccess(), "-1", False, Reason.NOT_ADDRESSED),
        (GroupAccess(), "-1", True, Reason.ALLOW_FROM),
        (GroupAccess(require_mention=False), "-1", False, Reason.ALLOW_FROM),
        (GroupAccess(allow=["-1"]), "-2", True, Reason.GROUP_NOT_SERVED),
        (GroupAccess(allow=["-1"]), "-1", True, Reason.ALLOW_FROM),
        (GroupAccess(allow=[]), "-1", True, Reason.GROUP_NOT_SERVED),
    ],
)
def test_group_rules(groups: GroupAccess, chat_id: str, addressed: bool, reason: Reason) -> None:
    m = message("7", chat_id=chat_id, chat_type=ChatType.GROUP, addressed=addressed)
    assert policy(groups=groups).judge(m).reason is reason


def test_a_group_that_is_not_served_ignores_admins_too_but_knows_them() -> None:
    m = message("1", chat_id="-5", chat_type=ChatType.GROUP, addressed=True)
    verdict = policy(groups=GroupAccess(allow=[])).judge(m)
    assert (verdict.reason, verdict.admin, verdict.chat_served) == (
        Reason.GROUP_NOT_SERVED,
        True,
        False,
    )


def test_a_channel_without_a_section_gets_the_defaults() -> None:
    p = AccessPolicy([], {})
    assert p.judge(message(channel="rec")).reason is Reason.ALLOW_FROM
    group = message(channel="rec", chat_type=ChatType.GROUP)
    assert p.judge(group).reason is Reason.NOT_ADDRESSED


async def test_the_reply_limiter_allows_one_reply_an_hour_even_across_a_restart(
    tmp_path: Path,
) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with Database(tmp_path / "db.sqlite") as db:
        limiter = ReplyLimiter(Store(db), timedelta(hours=1))
        assert await limiter.take(("tg", "a"), t0)
        assert not await limiter.take(("tg", "a"), t0 + timedelta(minutes=59))
        assert await limiter.take(("tg", "b"), t0)
    async with Database(tmp_path / "db.sqlite") as db:  # a restart forgets nothing
        limiter = ReplyLimiter(Store(db), timedelta(hours=1))
        assert not await limiter.take(("tg", "a"), t0 + timedelta(minutes=59))
        later = t0 + timedelta(hours=1)
        assert await limiter.take(("tg", "a"), later)
        await limiter.give_back(("tg", "a"), later)
        assert await limiter.take(("tg", "a"), later + timedelta(minutes=1))


def test_codes_are_unambiguous_and_read_back_in_any_form() -> None:
    code = new_code()
    assert len(code) == 9
    assert code[4] == "-"
    assert all(c in ALPHABET for c in code.replace("-", ""))
    assert not set("01OIL") & set(ALPHABET)
    assert parse_code(code.lower().replace("-", " ")) == code
    assert parse_code("ABCD-EFG0") is None  # 0 is not in the alphabet
    assert parse_code("ABCD-EFG") is None
    assert parse_who("telegram:42") == ("telegram", "42")
    assert parse_who("wechat:a@im.wechat") == ("wechat", "a@im.wechat")
    assert parse_who("42") is None
