"""Timestamps as stored: ISO 8601 text in UTC (sortable, readable)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso", "now_iso", "parse_iso"]


def iso(moment: datetime) -> str:
    """Fixed-width UTC text, so that string order is time order in SQL."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def now_iso() -> str:
    return iso(datetime.now(UTC))


def parse_iso(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
