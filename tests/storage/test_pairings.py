"""Pairing rows on a real database: codes, their rules, approval, revocation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from storage.sql.access.pairings import ApproveOutcome, CodeRules, IssueOutcome, PairingState
from storage.store import Store
from tests.storage.conftest import OpenStorage

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
RULES = CodeRules(ttl=timedelta(minutes=10), reissue_after=timedelta(hours=1), max_pending=3)


@pytest.fixture
async def store(open_storage: OpenStorage) -> AsyncIterator[Store]:
    async with open_storage() as db:
        yield Store(db)


async def issue(store: Store, sender: str, at: datetime = T0, channel: str = "telegram") -> str:
    counter = iter(range(10_000))
    result = await store.issue_pairing_code(
        channel, sender, sender, lambda: f"{sender[:4]:A<4}-{next(counter):04d}", at, RULES
    )
    assert result.outcome is IssueOutcome.ISSUED, result
    assert result.pairing is not None
    return result.pairing.code


async def test_an_approved_code_admits_the_sender_and_queues_a_notice(store: Store) -> None:
    code = await issue(store, "42")
    assert await store.approved_senders([("telegram", "42")]) == set()
    result = await store.approve_pairing(
        code, "telegram:1", T0 + timedelta(minutes=9), lambda channel: f"welcome to {channel}"
    )
    assert result.outcome is ApproveOutcome.APPROVED
    assert result.pairing is not None
    assert (result.pairing.who, result.pairing.approved_by) == ("telegram:42", "telegram:1")
    assert await store.approved_senders([("telegram", "42"), ("telegram", "7")]) == {
        ("telegram", "42")
    }
    assert await store.approved_senders([("feishu", "42")]) == set()  # per channel
    [row] = await store.db.read(lambda c: c.execute("SELECT * FROM outbox").fetchall())
    assert (row["channel"], row["chat_id"], row["text"]) == (
        "telegram",
        "42",
        "welcome to telegram",
    )
    again = await store.approve_pairing(code, "telegram:1", T0, None)
    assert again.outcome is ApproveOutcome.ALREADY


async def test_a_code_expires_and_an_unknown_code_is_unknown(store: Store) -> None:
    code = await issue(store, "42")
    late = await store.approve_pairing(code, "telegram:1", T0 + RULES.ttl, None)
    assert late.outcome is ApproveOutcome.EXPIRED
    assert (await store.approve_pairing(code, "telegram:1", T0, None)).outcome is (
        ApproveOutcome.EXPIRED
    )
    assert (await store.approve_pairing("ZZZZ-9999", "telegram:1", T0, None)).outcome is (
        ApproveOutcome.UNKNOWN
    )
    assert await store.approved_senders([("telegram", "42")]) == set()


async def test_one_code_per_sender_an_hour_and_three_live_codes_per_channel(
    store: Store,
) -> None:
    await issue(store, "a1")
    await issue(store, "b2")
    await issue(store, "c3")
    full = await store.issue_pairing_code("telegram", "d4", "d4", lambda: "D4D4-0000", T0, RULES)
    assert full.outcome is IssueOutcome.FULL
    again = await store.issue_pairing_code(
        "telegram", "a1", "a1", lambda: "XXXX-0001", T0 + timedelta(minutes=59), RULES
    )
    assert again.outcome is IssueOutcome.TOO_SOON  # though the first code has expired
    await issue(store, "d4", channel="feishu")  # another channel has its own three
    # once the first codes expired there is room again, and a1 may ask again after an hour
    await issue(store, "d4", T0 + RULES.ttl)
    await issue(store, "a1", T0 + timedelta(hours=1))


async def test_revoking_ends_the_approval_and_keeps_the_record(store: Store) -> None:
    code = await issue(store, "42")
    await store.approve_pairing(code, "host", T0, None)
    [listed] = await store.list_pairings(T0)
    assert listed.state is PairingState.APPROVED
    assert await store.revoke_pairing("telegram", "42", T0) == 1
    assert await store.revoke_pairing("telegram", "42", T0) == 0
    assert await store.approved_senders([("telegram", "42")]) == set()
    assert await store.list_pairings(T0) == []
    assert await store.pairing_of("telegram", "42", T0) is None
    states = await store.db.read(lambda c: c.execute("SELECT state FROM pairings").fetchall())
    assert [r["state"] for r in states] == ["revoked"]


async def test_pairing_of_shows_the_approval_or_the_live_code(store: Store) -> None:
    code = await issue(store, "42")
    pending = await store.pairing_of("telegram", "42", T0)
    assert pending is not None
    assert (pending.state, pending.code) == (PairingState.PENDING, code)
    assert await store.pairing_of("telegram", "42", T0 + RULES.ttl) is None
    [listed] = await store.list_pairings(T0)
    assert listed.code == code
    assert await store.list_pairings(T0 + RULES.ttl) == []


async def test_many_senders_are_looked_up_in_one_call(store: Store) -> None:
    for n in range(3):
        code = await issue(store, f"s{n}", T0 + timedelta(hours=n))
        await store.approve_pairing(code, "host", T0 + timedelta(hours=n), None)
    asked = [("telegram", f"s{n}") for n in range(1000)]
    assert await store.approved_senders(asked) == {("telegram", f"s{n}") for n in range(3)}


async def test_a_limited_list_is_the_newest_pairings_oldest_first(store: Store) -> None:
    for n in range(3):
        code = await issue(store, f"s{n}", T0 + timedelta(hours=n))
        await store.approve_pairing(code, "host", T0 + timedelta(hours=n), None)
    live = await issue(store, "new", T0 + timedelta(hours=3))
    listed = await store.list_pairings(T0 + timedelta(hours=3), limit=2)
    assert [(p.sender_id, p.state) for p in listed] == [
        ("s2", PairingState.APPROVED),
        ("new", PairingState.PENDING),
    ]
    assert listed[1].code == live
    every = await store.list_pairings(T0 + timedelta(hours=3))
    assert [p.sender_id for p in every] == ["s0", "s1", "s2", "new"]
