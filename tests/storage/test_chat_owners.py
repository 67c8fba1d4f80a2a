"""Chat owners on a real database (storage/sql/access/chat_owners.py): the first claim
wins, racing claims agree, owners survive a reopen, and a chat used before
owners were recorded is given to whom its stored senders say."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.bus import InboundMessage
from storage.store import Store
from tests.storage.conftest import OpenStorage


class Legacy:
    """A `legacy_owner` rule that records what it was asked."""

    def __init__(self, owner: str = "operator") -> None:
        self.owner = owner
        self.asked: list[list[str]] = []

    def __call__(self, senders: Sequence[str]) -> str:
        self.asked.append(sorted(senders))
        return self.owner


async def test_the_first_claim_owns_a_new_chat_and_it_survives_a_reopen(
    open_storage: OpenStorage,
) -> None:
    legacy = Legacy()
    async with open_storage() as db:
        store = Store(db)
        assert await store.claim_chat("websocket", "X", "token:alice", legacy) == "token:alice"
        assert await store.claim_chat("websocket", "X", "token:bob", legacy) == "token:alice"
        assert await store.claim_chat("other", "X", "token:bob", legacy) == "token:bob"
    async with open_storage() as db:
        assert await Store(db).claim_chat("websocket", "X", "token:bob", legacy) == "token:alice"
    assert legacy.asked == []  # new chats are never legacy ones


async def test_racing_claims_of_a_new_chat_have_one_owner(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        store = Store(db)
        claims = [
            store.claim_chat("websocket", f"chat-{n}", principal, Legacy())
            for n in range(20)
            for principal in ("token:alice", "token:bob")
        ]
        owners = await asyncio.gather(*claims)
        for n in range(20):
            alice_saw, bob_saw = owners[2 * n], owners[2 * n + 1]
            assert alice_saw == bob_saw  # both were told the one owner
            assert alice_saw in ("token:alice", "token:bob")
        rows = await db.read(lambda c: c.execute("SELECT COUNT(*) FROM chat_owners").fetchone())
        assert rows[0] == 20


async def test_a_chat_from_before_owners_goes_to_whom_its_senders_say(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        store = Store(db)
        inbound = [
            InboundMessage("websocket", "alone", "alice", "hi", message_id="alone/1"),
            InboundMessage("websocket", "alone", "alice", "again", message_id="alone/2"),
            InboundMessage("websocket", "shared", "alice", "hi", message_id="shared/1"),
            InboundMessage("websocket", "shared", "bob", "me too", message_id="shared/2"),
        ]
        await store.record_inbound(inbound)
        await store.new_session("websocket", "pruned", "pruned", None)  # history, no inbox rows

        alone = Legacy("token:alice")
        assert await store.claim_chat("websocket", "alone", "token:bob", alone) == "token:alice"
        assert alone.asked == [["alice"]]
        shared = Legacy("operator")
        assert await store.claim_chat("websocket", "shared", "token:alice", shared) == "operator"
        assert shared.asked == [["alice", "bob"]]
        pruned = Legacy("operator")
        assert await store.claim_chat("websocket", "pruned", "token:bob", pruned) == "operator"
        assert pruned.asked == [[]]
        # decided once: later claims read the stored owner
        assert await store.claim_chat("websocket", "alone", "token:bob", Legacy()) == "token:alice"
