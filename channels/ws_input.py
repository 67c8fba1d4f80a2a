"""What the WebSocket channel accepts from a client: frames and identities.

`parse_frame` turns one text frame into a JSON object or raises
`ProtocolError` (never anything else: too deep, a number too long, not an
object); the channel answers an `error` frame and keeps the connection.
`TokenBook` decides who a connection is from the token in its `hello`: a
named token (`channels.websocket.tokens`) makes the connection that sender,
whatever its frames claim; the gateway's `auth_token` is the operator's and
may name the sender itself. The access policy (gateway.access.policy) then judges
that sender like any other channel's; nothing here is an allow-list.
Each identity is also a principal, the owner of the chats it opens
(`Identity.principal`; channels.base.ChatOwners): `token:<name>` for a named
token, `operator` for the gateway token and for every connection of a
gateway without tokens.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.bus import Decision, button_command

__all__ = [
    "OPERATOR",
    "Identity",
    "LocalChatOwners",
    "ProtocolError",
    "TokenBook",
    "approve_text",
    "parse_frame",
    "safe_id",
]

OPERATOR = "operator"  # the principal of the gateway token (or of a gateway without tokens)

_REASON_MAX = 500


class ProtocolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_frame(data: str) -> dict[str, Any]:
    try:
        frame = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ProtocolError("bad_json", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ProtocolError("bad_json", "JSON nested too deeply") from None
    except ValueError:  # e.g. an integer beyond sys.get_int_max_str_digits()
        raise ProtocolError("bad_json", "JSON value out of range (a number too long?)") from None
    if not isinstance(frame, dict):
        raise ProtocolError("bad_frame", "a frame must be a JSON object")
    return frame


def safe_id(value: Any) -> str | int | None:
    """A frame's `id` as it may be echoed in an error frame: short scalars only."""
    if isinstance(value, str) and len(value) <= 128:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
        return value
    return None


def approve_text(frame: dict[str, Any]) -> str:
    """An `approve` frame as the command text it stands for: `/approve N`,
    `/deny N` or `/deny N reason` (the gateway decides whether it is taken)."""
    approval_id, decision, reason = (
        frame.get("approval_id"),
        frame.get("decision"),
        frame.get("reason"),
    )
    if (
        not isinstance(approval_id, int)
        or isinstance(approval_id, bool)
        or not 0 < approval_id < 2**63
    ):
        raise ProtocolError("bad_frame", "approve.approval_id must be a positive integer")
    if decision not in (Decision.APPROVE.value, Decision.DENY.value):
        raise ProtocolError("bad_frame", 'approve.decision must be "approve" or "deny"')
    if reason is not None and (not isinstance(reason, str) or len(reason) > _REASON_MAX):
        raise ProtocolError("bad_frame", f"approve.reason must be a string of <= {_REASON_MAX}")
    text = button_command(Decision(decision), approval_id)
    if decision == Decision.DENY.value and reason and reason.strip():
        text += " " + " ".join(reason.split())
    return text


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a connection is. `sender`: fixed by a named token (frames may not
    claim another); None: the frame's `sender_id`, else the chat id."""

    sender: str | None = None

    @property
    def principal(self) -> str:
        """Who owns the chats this connection opens."""
        return OPERATOR if self.sender is None else f"token:{self.sender}"

    def sender_for(self, claimed: Any, chat_id: str) -> str:
        if claimed is not None and not isinstance(claimed, str):
            raise ProtocolError("bad_frame", "message.sender_id must be a string")
        if self.sender is not None:
            if claimed not in (None, "", self.sender):
                raise ProtocolError(
                    "forbidden_sender",
                    "this connection's token is for another sender; sender_id not accepted",
                )
            return self.sender
        return claimed or chat_id


class TokenBook:
    def __init__(self, master: str | None, named: Mapping[str, str]) -> None:
        self._master = master.encode() if master else None
        self._named = [(name, token.encode()) for name, token in named.items()]

    @property
    def required(self) -> bool:
        return self._master is not None or bool(self._named)

    def identify(self, token: Any) -> Identity | None:
        """The identity `token` gives, or None when it is wrong (or missing but needed)."""
        if not self.required:
            return Identity()
        if not isinstance(token, str):
            return None
        given = token.encode("utf-8", "surrogatepass")
        found: Identity | None = None
        # every token is compared, so the time taken does not say which matched
        for name, expected in self._named:
            if hmac.compare_digest(given, expected) and found is None:
                found = Identity(name)
        if self._master is not None and hmac.compare_digest(given, self._master):
            found = found or Identity()
        return found

    def legacy_owner(self, senders: Sequence[str]) -> str:
        """The owner of a chat used before owners were recorded: the named
        token that sent every stored message of it, else the operator."""
        names = {name for name, _ in self._named}
        if len(senders) == 1 and senders[0] in names:
            return Identity(senders[0]).principal
        return OPERATOR


class LocalChatOwners:
    """`ChatOwners` in memory, for a channel the runtime gave no store (tests,
    embedding): owners last as long as the process."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}

    async def claim(
        self, chat_id: str, principal: str, legacy_owner: Callable[[Sequence[str]], str]
    ) -> str:
        return self._owners.setdefault(chat_id, principal)
