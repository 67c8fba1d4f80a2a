"""What each `picobot doctor` check found, and how it is printed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Finding", "Status", "ok", "problem", "secret_of", "warn"]


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"  # worth knowing; does not fail the run
    PROBLEM = "problem"


@dataclass(frozen=True, slots=True)
class Finding:
    status: Status
    check: str
    message: str
    fix: str | None = None

    def render(self) -> str:
        text = f"{self.status.value:<8}{self.check}: {self.message}"
        return text + (f"\n{'':8}fix: {self.fix}" if self.fix else "")


def ok(check: str, message: str) -> Finding:
    return Finding(Status.OK, check, message)


def warn(check: str, message: str, fix: str | None = None) -> Finding:
    return Finding(Status.WARN, check, message, fix)


def problem(check: str, message: str, fix: str) -> Finding:
    return Finding(Status.PROBLEM, check, message, fix)


def secret_of(value: Any) -> str:
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if getter else (value or ""))
