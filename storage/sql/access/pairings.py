"""Pairings: senders an admin let in with a code, one table (migration 3).

A code is issued to an unknown sender (`pending`, valid until `expires_at`),
then approved by an admin (`approved`: the sender is admitted on that channel
from then on) or left to expire; an approval ends when it is revoked. Rows are
never deleted: who approved whom, and when, stays on record. Synchronous
functions of a `sqlite3.Connection` for `Database.read`/`write`; the rules that
decide when to issue a code are arguments, the texts are the caller's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from gateway.bus import OutboundMessage
from storage.clock import iso, parse_iso
from storage.sql.delivery import outbox
from storage.sql.dialect import inserted_id

__all__ = [
    "Approval",
    "ApproveOutcome",
    "CodeRules",
    "Issue",
    "IssueOutcome",
    "Pairing",
    "PairingState",
    "approve",
    "approved_among",
    "issue_code",
    "list_pairings",
    "pairing_of",
    "revoke",
]


class PairingState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REVOKED = "revoked"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Pairing:
    id: int
    channel: str
    sender_id: str
    chat_id: str
    code: str
    state: PairingState
    created_at: datetime
    expires_at: datetime
    approved_by: str | None
    approved_at: datetime | None

    @property
    def who(self) -> str:
        return f"{self.channel}:{self.sender_id}"


@dataclass(frozen=True, slots=True)
class CodeRules:
    ttl: timedelta  # how long a code can be approved
    reissue_after: timedelta  # a sender gets at most one code per this interval
    max_pending: int  # live codes one channel may have at once


class IssueOutcome(StrEnum):
    ISSUED = "issued"  # a new code
    TOO_SOON = "too_soon"  # the sender got a code less than `reissue_after` ago
    FULL = "full"  # the channel already has `max_pending` live codes
    APPROVED = "approved"  # the sender is approved already


@dataclass(frozen=True, slots=True)
class Issue:
    outcome: IssueOutcome
    pairing: Pairing | None = None  # the new code, or the approval


class ApproveOutcome(StrEnum):
    APPROVED = "approved"
    UNKNOWN = "unknown"  # no such code
    EXPIRED = "expired"
    ALREADY = "already"  # the sender was approved before (the code is spent)


@dataclass(frozen=True, slots=True)
class Approval:
    outcome: ApproveOutcome
    pairing: Pairing | None = None


def _row(r: sqlite3.Row) -> Pairing:
    return Pairing(
        id=r["id"],
        channel=r["channel"],
        sender_id=r["sender_id"],
        chat_id=r["chat_id"],
        code=r["code"],
        state=PairingState(r["state"]),
        created_at=parse_iso(r["created_at"]),
        expires_at=parse_iso(r["expires_at"]),
        approved_by=r["approved_by"],
        approved_at=parse_iso(r["approved_at"]) if r["approved_at"] else None,
    )


def _expire(conn: sqlite3.Connection, now: datetime) -> None:
    conn.execute(
        "UPDATE pairings SET state = 'expired' WHERE state = 'pending' AND expires_at <= ?",
        (iso(now),),
    )


def _approved(conn: sqlite3.Connection, channel: str, sender_id: str) -> Pairing | None:
    row = conn.execute(
        "SELECT * FROM pairings WHERE channel = ? AND sender_id = ? AND state = 'approved'",
        (channel, sender_id),
    ).fetchone()
    return _row(row) if row is not None else None


def issue_code(
    conn: sqlite3.Connection,
    *,
    channel: str,
    sender_id: str,
    chat_id: str,
    make_code: Callable[[], str],
    now: datetime,
    rules: CodeRules,
) -> Issue:
    """A new pending code for (channel, sender_id), unless a rule says no."""
    _expire(conn, now)
    approved = _approved(conn, channel, sender_id)
    if approved is not None:
        return Issue(IssueOutcome.APPROVED, approved)
    recent = conn.execute(
        "SELECT 1 FROM pairings WHERE channel = ? AND sender_id = ? AND created_at > ?",
        (channel, sender_id, iso(now - rules.reissue_after)),
    ).fetchone()
    if recent is not None:
        return Issue(IssueOutcome.TOO_SOON)
    (pending,) = conn.execute(
        "SELECT count(*) FROM pairings WHERE channel = ? AND state = 'pending'", (channel,)
    ).fetchone()
    if pending >= rules.max_pending:
        return Issue(IssueOutcome.FULL)
    for _ in range(5):  # a live code is unique; a clash is all but impossible, yet cheap to retry
        cursor = conn.execute(
            "INSERT INTO pairings (channel, sender_id, chat_id, code, state, created_at, "
            "expires_at) VALUES (?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT DO NOTHING RETURNING id",
            (channel, sender_id, chat_id, make_code(), iso(now), iso(now + rules.ttl)),
        )
        row_id = inserted_id(cursor)
        if row_id is None:
            continue  # the code is taken
        row = conn.execute("SELECT * FROM pairings WHERE id = ?", (row_id,)).fetchone()
        return Issue(IssueOutcome.ISSUED, _row(row))
    raise RuntimeError("could not draw a unique pairing code")


def approve(
    conn: sqlite3.Connection,
    *,
    code: str,
    approved_by: str,
    now: datetime,
    notice: Callable[[str], str] | None,
) -> Approval:
    """Approve the live code `code`; `notice(channel)` (if given) is the text
    queued to the sender's chat (in the language of their channel)."""
    row = conn.execute(
        "SELECT * FROM pairings WHERE code = ? ORDER BY state = 'pending' DESC, id DESC LIMIT 1",
        (code,),
    ).fetchone()
    if row is None or row["state"] == PairingState.REVOKED:
        return Approval(ApproveOutcome.UNKNOWN)
    found = _row(row)
    if found.state is PairingState.APPROVED:
        return Approval(ApproveOutcome.ALREADY, found)
    if found.state is PairingState.EXPIRED or found.expires_at <= now:
        _expire(conn, now)
        return Approval(ApproveOutcome.EXPIRED, found)
    approved = _approved(conn, found.channel, found.sender_id)
    if approved is not None:
        conn.execute("UPDATE pairings SET state = 'expired' WHERE id = ?", (found.id,))
        return Approval(ApproveOutcome.ALREADY, approved)
    conn.execute(
        "UPDATE pairings SET state = 'approved', approved_by = ?, approved_at = ? WHERE id = ?",
        (approved_by, iso(now), found.id),
    )
    if notice is not None:
        outbox.enqueue(conn, OutboundMessage(found.channel, found.chat_id, notice(found.channel)))
    row = conn.execute("SELECT * FROM pairings WHERE id = ?", (found.id,)).fetchone()
    return Approval(ApproveOutcome.APPROVED, _row(row))


def revoke(conn: sqlite3.Connection, *, channel: str, sender_id: str, now: datetime) -> int:
    """End the sender's approval and any live code; how many rows changed."""
    cursor = conn.execute(
        "UPDATE pairings SET state = 'revoked', revoked_at = ? "
        "WHERE channel = ? AND sender_id = ? AND state IN ('approved', 'pending')",
        (iso(now), channel, sender_id),
    )
    return cursor.rowcount


def approved_among(
    conn: sqlite3.Connection, senders: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Those (channel, sender_id) pairs that hold an approval now."""
    wanted = sorted(set(senders))
    found: set[tuple[str, str]] = set()
    for start in range(0, len(wanted), 400):  # well under SQLite's parameter limit
        chunk = wanted[start : start + 400]
        values = ", ".join("(?, ?)" for _ in chunk)
        rows = conn.execute(
            "SELECT channel, sender_id FROM pairings WHERE state = 'approved' "
            f"AND (channel, sender_id) IN (VALUES {values})",
            [part for key in chunk for part in key],
        ).fetchall()
        found.update((r["channel"], r["sender_id"]) for r in rows)
    return found


def list_pairings(
    conn: sqlite3.Connection, now: datetime, limit: int | None = None
) -> list[Pairing]:
    """Approvals and live codes, oldest first; only the newest `limit` of them."""
    sql = (
        "SELECT * FROM pairings WHERE state = 'approved' "
        "OR (state = 'pending' AND expires_at > ?) ORDER BY id DESC"
    )
    params: list[object] = [iso(now)]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = conn.execute(sql, params).fetchall()
    return [_row(r) for r in reversed(rows)]


def pairing_of(
    conn: sqlite3.Connection, channel: str, sender_id: str, now: datetime
) -> Pairing | None:
    """The sender's approval, else their live code, else None."""
    row = conn.execute(
        "SELECT * FROM pairings WHERE channel = ? AND sender_id = ? "
        "AND (state = 'approved' OR (state = 'pending' AND expires_at > ?)) "
        "ORDER BY state = 'approved' DESC, id DESC LIMIT 1",
        (channel, sender_id, iso(now)),
    ).fetchone()
    return _row(row) if row is not None else None
