"""What the memory tools and the `MemoryService` exchange, and the limits.

A scope is one user on one channel (`user`, `channel:sender_id`): the tools
build it from the turn (`ToolContext.channel`, `sender_id`), never from an
argument, so no user can reach another's memories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "KEY_PATTERN",
    "MAX_CONTENT_CHARS",
    "MAX_ENTRIES_PER_SCOPE",
    "MAX_SEARCH_LIMIT",
    "MemoryEntry",
    "MemoryLimitError",
    "MemoryOrigin",
    "MemoryScope",
    "SourceType",
    "WriteOutcome",
    "valid_name",
]

MAX_CONTENT_CHARS: Final = 4_000
MAX_ENTRIES_PER_SCOPE: Final = 500
DEFAULT_SEARCH_LIMIT: Final = 10
MAX_SEARCH_LIMIT: Final = 50
KEY_PATTERN: Final = r"[a-z0-9_.-]{1,64}"
_KEY = re.compile(KEY_PATTERN)


def valid_name(name: str) -> bool:
    """A namespace or key: lower-case letters, digits, `_ . -`, 1–64 characters."""
    return _KEY.fullmatch(name) is not None


class MemoryLimitError(Exception):
    """A write the memory refuses (scope full, content too long); the message is for the model."""


class SourceType(StrEnum):
    AGENT = "agent"  # written by the model through memory_manage
    MEMORY_MAINTENANCE = "memory_maintenance"


class WriteOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"


@dataclass(frozen=True, slots=True)
class MemoryScope:
    kind: str
    key: str

    @classmethod
    def of_user(cls, channel: str, sender_id: str) -> MemoryScope:
        return cls("user", f"{channel}:{sender_id}")


@dataclass(frozen=True, slots=True)
class MemoryOrigin:
    """Where a write came from: the turn's session and user message."""

    session_id: str | None
    message_id: str | None
    message_seq: int | None
    channel: str | None
    chat_id: str | None


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    namespace: str
    key: str
    content: str
    updated_at: str
    source_type: str
    category: str | None = None
