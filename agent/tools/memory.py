"""`memory_search` (read) and `memory_manage` (write): the model's long-term memory.

Both reach storage only through `ToolContext.services.memory` (the
`MemoryService` protocol). The scope is always the sender of the turn
(`MemoryScope.of_user(ctx.channel, ctx.sender_id)`), never an argument. A
write is durable when the tool returns and does not change the current
turn's prompt: memory reaches the model only as this tool's result.
"""

from __future__ import annotations

import json
from typing import ClassVar, Literal

from pydantic import Field

from agent.memory.types import (
    DEFAULT_SEARCH_LIMIT,
    KEY_PATTERN,
    MAX_CONTENT_CHARS,
    MAX_SEARCH_LIMIT,
    MemoryEntry,
    MemoryLimitError,
    MemoryOrigin,
    MemoryScope,
)
from agent.tools.base import MemoryService, Tool, ToolArgs, ToolContext, ToolError

__all__ = ["MemoryManageTool", "MemorySearchTool"]

_NAME = Field(pattern=f"^{KEY_PATTERN}$")  # the pattern tells the model the rules


def _service(ctx: ToolContext) -> MemoryService:
    if ctx.services.memory is None:
        raise ToolError("long-term memory is not available on this gateway")
    return ctx.services.memory


def _scope(ctx: ToolContext) -> MemoryScope:
    return MemoryScope.of_user(ctx.channel, ctx.sender_id)


def _entry(e: MemoryEntry) -> dict[str, str]:
    return {
        "namespace": e.namespace,
        "memory_key": e.key,
        "content": e.content,
        "updated_at": e.updated_at,
    }


class MemorySearchArgs(ToolArgs):
    action: Literal["search", "get", "list"]
    query: str | None = Field(None, max_length=500)
    # no pattern: a key that breaks the rules is one that is not there
    namespace: str | None = Field(None, description="e.g. profile, preferences, tasks")
    memory_key: str | None = None
    limit: int = Field(DEFAULT_SEARCH_LIMIT, ge=1, le=MAX_SEARCH_LIMIT)


class MemorySearchTool(Tool[MemorySearchArgs]):
    name: ClassVar[str] = "memory_search"
    description: ClassVar[str] = (
        "Search what you remember about this user (only theirs): preferences, identity, "
        "ongoing tasks, past decisions. Actions: search (query, namespace?), get "
        "(namespace, memory_key), list (namespace?)."
    )
    Args: ClassVar[type[ToolArgs]] = MemorySearchArgs

    async def run(self, args: MemorySearchArgs, ctx: ToolContext) -> str:
        memory, scope = _service(ctx), _scope(ctx)
        if args.action == "get":
            if args.namespace is None or args.memory_key is None:
                raise ToolError("action 'get' needs namespace and memory_key")
            found = await memory.get(scope, args.namespace, args.memory_key)
            if found is None:
                raise ToolError(f"no memory {args.namespace}/{args.memory_key}")
            return json.dumps(_entry(found), ensure_ascii=False)
        if args.action == "search":
            if not args.query or not args.query.strip():
                raise ToolError("action 'search' needs a query")
            entries = await memory.search(scope, args.query, args.namespace, args.limit)
        else:
            entries = await memory.entries(scope, args.namespace, args.limit)
        return json.dumps({"results": [_entry(e) for e in entries]}, ensure_ascii=False)


class MemoryManageArgs(ToolArgs):
    action: Literal["put", "update", "delete"]
    namespace: str = _NAME
    memory_key: str = _NAME
    content: str | None = Field(None, max_length=MAX_CONTENT_CHARS)


class MemoryManageTool(Tool[MemoryManageArgs]):
    name: ClassVar[str] = "memory_manage"
    description: ClassVar[str] = (
        "Remember, correct or forget one fact about this user, one fact per key; search "
        "first, keep only what stays useful. put creates or replaces; update needs the key."
    )
    Args: ClassVar[type[ToolArgs]] = MemoryManageArgs

    async def run(self, args: MemoryManageArgs, ctx: ToolContext) -> str:
        memory, scope = _service(ctx), _scope(ctx)
        where = f"{args.namespace}/{args.memory_key}"
        if args.action == "delete":
            if not await memory.delete(scope, args.namespace, args.memory_key):
                raise ToolError(f"no memory {where} to delete")
            return f"deleted {where}"
        if args.content is None or not args.content.strip():
            raise ToolError(f"action {args.action!r} needs content")
        origin = MemoryOrigin(
            ctx.session_id, ctx.message_id, ctx.message_seq, ctx.channel, ctx.chat_id
        )
        try:
            if args.action == "update":
                if not await memory.update(
                    scope, args.namespace, args.memory_key, args.content, origin
                ):
                    raise ToolError(f"no memory {where} to update (use put to create it)")
                return f"updated {where}"
            outcome = await memory.put(scope, args.namespace, args.memory_key, args.content, origin)
        except MemoryLimitError as exc:
            raise ToolError(str(exc)) from None
        return f"{outcome.value} {where}"
