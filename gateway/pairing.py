"""Pairing codes and what approving one says, shared by the gateway and the CLI.

A code is 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L),
written XXXX-XXXX; typed back it may be in any case, with or without the dash.
The rules (lifetime, one code per sender per hour, three live codes per
channel) are `CODE_RULES`; the table is storage.pairings.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from storage.pairings import Approval, ApproveOutcome, CodeRules, Pairing, PairingState

__all__ = [
    "ALPHABET",
    "APPROVED_NOTICE",
    "CODE_RULES",
    "approval_text",
    "describe_pairing",
    "new_code",
    "pairing_state",
    "parse_code",
    "parse_who",
]

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_RULES = CodeRules(ttl=timedelta(minutes=10), reissue_after=timedelta(hours=1), max_pending=3)
# Sent to the new user's chat when an admin approves their code.
APPROVED_NOTICE = "An admin approved your access. You can talk to me now: send your message again."


def new_code() -> str:
    raw = "".join(secrets.choice(ALPHABET) for _ in range(8))
    return f"{raw[:4]}-{raw[4:]}"


def parse_code(text: str) -> str | None:
    """The code in its stored form, or None when `text` cannot be one."""
    raw = "".join(text.split()).replace("-", "").upper()
    if len(raw) != 8 or any(c not in ALPHABET for c in raw):
        return None
    return f"{raw[:4]}-{raw[4:]}"


def parse_who(text: str) -> tuple[str, str] | None:
    """("telegram", "42") for "telegram:42"; None when it is not channel:sender_id."""
    channel, sep, sender = text.strip().partition(":")
    if not sep or not channel or not sender:
        return None
    return channel, sender


def approval_text(code: str, result: Approval) -> str:
    """What the admin is told after `/pair approve` or `picobot pairing approve`."""
    match result.outcome:
        case ApproveOutcome.APPROVED:
            assert result.pairing is not None
            return f"Approved {result.pairing.who} (code {code}); they have been told."
        case ApproveOutcome.ALREADY:
            who = result.pairing.who if result.pairing is not None else "that sender"
            return f"{who} is approved already; code {code} is spent."
        case ApproveOutcome.EXPIRED:
            return (
                f"Code {code} has expired. They get a new one when they write to the bot "
                "again (at most one an hour)."
            )
        case ApproveOutcome.UNKNOWN:
            return f"No pending pairing code {code}. Check the code (`/pair list` shows them)."


def pairing_state(p: Pairing) -> str:
    """ "approved by … on …" or "code …, pending until …"."""
    if p.state is PairingState.APPROVED:
        when = p.approved_at.strftime("%Y-%m-%d %H:%M UTC") if p.approved_at else "?"
        return f"approved by {p.approved_by or '?'} on {when}"
    return f"code {p.code}, pending until {p.expires_at.strftime('%H:%M UTC')}"


def describe_pairing(p: Pairing) -> str:
    """One line of `/pair list` and `picobot pairing list`."""
    return f"{p.who}  {pairing_state(p)}"
