"""Tool names the model sees for MCP tools: `mcp_{server_key}_{tool}`.

Providers accept function names matching `^[A-Za-z0-9_-]{1,64}$`; anything
else in a server key or a tool name becomes `_`, and a name that would be
longer keeps its first 55 characters plus `_` and 8 hex digits of the SHA-1
of the unsanitised name, so two long names that differ only at the end stay
apart. The same inputs always give the same name.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["MAX_TOOL_NAME", "PREFIX", "tool_name"]

PREFIX: Final = "mcp_"
MAX_TOOL_NAME: Final = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS: Final = 8


def tool_name(server_key: str, tool: str) -> str:
    raw = f"{PREFIX}{server_key}_{tool}"
    name = _UNSAFE.sub("_", raw)
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha1(raw.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return f"{name[: MAX_TOOL_NAME - _HASH_CHARS - 1]}_{digest}"
