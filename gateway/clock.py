"""The gateway's clock: "now" as a timezone-aware UTC datetime, injected
(`Clock`) so that tests can move time; `utc_now` is the real one. A leaf: it
imports no project module."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "utc_now"]

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)
