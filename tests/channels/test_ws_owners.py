"""Who a WebSocket connection is as an owner of chats (channels.ws_input):
principals, the owner of a chat from before owners were recorded, and the
in-memory owners a channel without a store uses."""

from __future__ import annotations

import asyncio

from channels.ws_input import OPERATOR, LocalChatOwners, TokenBook

BOOK = TokenBook("operator-token", {"alice": "alice-token", "operator": "named-operator"})


def test_each_token_is_its_own_principal_and_none_is_the_operators() -> None:
    alice, master, named = (
        BOOK.identify(t) for t in ("alice-token", "operator-token", "named-operator")
    )
    assert alice is not None
    assert master is not None
    assert named is not None
    assert (alice.principal, master.principal) == ("token:alice", OPERATOR)
    assert named.principal == "token:operator"  # a token named "operator" is not the operator
    without_tokens = TokenBook(None, {}).identify(None)
    assert without_tokens is not None
    assert without_tokens.principal == OPERATOR


def test_a_chat_from_before_owners_is_its_only_named_senders_else_the_operators() -> None:
    assert BOOK.legacy_owner(["alice"]) == "token:alice"
    assert BOOK.legacy_owner(["alice", "bob"]) == OPERATOR  # shared: nobody's alone
    assert BOOK.legacy_owner(["bob"]) == OPERATOR  # no such token: an operator-named sender
    assert BOOK.legacy_owner([]) == OPERATOR  # its messages were pruned


async def test_local_owners_let_the_first_claim_win() -> None:
    owners = LocalChatOwners()
    got = await asyncio.gather(
        owners.claim("X", "token:alice", BOOK.legacy_owner),
        owners.claim("X", "token:bob", BOOK.legacy_owner),
    )
    assert list(got) == ["token:alice", "token:alice"]
