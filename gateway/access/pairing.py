"""Pairing codes and what approving one says, shared by the gateway and the CLI.

A code is 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L),
written XXXX-XXXX; typed back it may be in any case, with or without the dash.
The rules (lifetime, one code per sender per hour, three live codes per
channel) are `CODE_RULES`; the table is storage.sql.access.pairings.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta

from gateway.i18n import Locale, Msg, tr
from storage.sql.access.pairings import (
    Approval,
    ApproveOutcome,
    CodeRules,
    Pairing,
    PairingState,
)

__all__ = [
    "ALPHABET",
    "CODE_RULES",
    "approval_text",
    "approved_notice",
    "describe_pairing",
    "new_code",
    "pairing_state",
    "parse_code",
    "parse_who",
]

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_RULES = CodeRules(ttl=timedelta(minutes=10), reissue_after=timedelta(hours=1), max_pending=3)


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


def approved_notice(locale: Callable[[str], Locale]) -> Callable[[str], str]:
    """What the new user's chat is sent when an admin approves their code: in
    the locale of their channel (`locale(channel)`)."""
    return lambda channel: tr(locale(channel), Msg.APPROVED_NOTICE)


def approval_text(code: str, result: Approval, locale: Locale = Locale.EN) -> str:
    """What the admin is told after `/pair approve` or `picobot pairing approve`."""
    match result.outcome:
        case ApproveOutcome.APPROVED:
            assert result.pairing is not None
            return tr(locale, Msg.APPROVAL_APPROVED, who=result.pairing.who, code=code)
        case ApproveOutcome.ALREADY:
            who = result.pairing.who if result.pairing is not None else None
            return tr(
                locale, Msg.APPROVAL_ALREADY, who=who or tr(locale, Msg.THAT_SENDER), code=code
            )
        case ApproveOutcome.EXPIRED:
            return tr(locale, Msg.APPROVAL_EXPIRED, code=code)
        case ApproveOutcome.UNKNOWN:
            return tr(locale, Msg.APPROVAL_UNKNOWN, code=code)


def pairing_state(p: Pairing, locale: Locale = Locale.EN) -> str:
    """ "approved by … on …" or "code …, pending until …"."""
    if p.state is PairingState.APPROVED:
        when = p.approved_at.strftime("%Y-%m-%d %H:%M UTC") if p.approved_at else "?"
        return tr(locale, Msg.PAIRING_APPROVED_BY, by=p.approved_by or "?", when=when)
    return tr(locale, Msg.PAIRING_PENDING, code=p.code, until=p.expires_at.strftime("%H:%M UTC"))


def describe_pairing(p: Pairing, locale: Locale = Locale.EN) -> str:
    """One line of `/pair list` and `picobot pairing list`."""
    return f"{p.who}  {pairing_state(p, locale)}"
