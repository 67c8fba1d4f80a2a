"""The Anthropic request body: `ChatMessage`s → `system` blocks and `messages`,
with prompt-cache breakpoints on the stable prefix.

The request keeps the order the context builder gave it, most stable first
(docs/caching.md), because Anthropic caches a prefix only when a later request
repeats its exact bytes:

- the leading system messages (operator prompt, AGENT.md, the compaction
  summary, kept scheduled-job prompts) become the `system` text blocks, one per
  message, in order;
- a system message further down the history (a re-injected AGENT.md, a
  scheduled job's prompt) stays in its place, as a text block of a user turn
  wrapped in `<system-reminder>` tags. Merging it into `system`, as this module
  once did, changed the start of every later request, so nothing was ever
  read from the cache; user-role text is accepted by every Anthropic-compatible
  endpoint (the SDK also types `role: "system"` messages, which not all do);
- the request's tail (per-turn blocks) goes last, the same way, after the last
  breakpoint.

Breakpoints (`cache_control`), at most four as the API allows: the last tool
definition, the AGENT.md block (or the last system block before the summary),
the last system block (the summary), and the last block of the history.
Tool calls map to `tool_use` blocks, tool results to `tool_result` blocks
inside user turns (with a result's images as `image` blocks in its
content), consecutive same-role messages are merged, images are base64
`image` blocks. Nothing here does I/O but reading media files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent.messages import ChatMessage, Marker, Role
from agent.providers.base import CacheTTL, ToolSpec
from agent.providers.media import load_media, mention_files

__all__ = [
    "MAX_BREAKPOINTS",
    "AnthropicPrompt",
    "reminder_text",
    "to_anthropic_prompt",
    "to_anthropic_tools",
]

MAX_BREAKPOINTS: Final = 4  # the Messages API rejects a request with more

Block = dict[str, Any]


def reminder_text(text: str) -> str:
    """A system message's text as it travels inside a user turn."""
    return f"<system-reminder>\n{text}\n</system-reminder>"


async def _user_blocks(message: ChatMessage) -> list[Block]:
    media = await load_media(message.media)
    blocks: list[Block] = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.data_b64},
        }
        for image in media.images
    ]
    text = mention_files(message.content, media.other_paths)
    if text:  # the API rejects empty text blocks
        blocks.append({"type": "text", "text": text})
    return blocks


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _tool_input(arguments: str) -> dict[str, Any]:
    """The model's argument text as the object the API wants; text that is not
    strict JSON (NaN and Infinity included: no request could carry them, and
    the chat would fail on every later turn), or nests deeper than
    `_INPUT_DEPTH_MAX`, is passed on as it came."""
    try:
        value = json.loads(arguments or "{}", parse_constant=_no_constant)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to read
        return {"raw_arguments": arguments}
    if not _nests_within(value, _INPUT_DEPTH_MAX):
        return {"raw_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


# No tool's input nests this deep; a service's JSON parser may refuse more
# (many stop at 128), and every later request of the chat carries the call.
_INPUT_DEPTH_MAX = 64


def _nests_within(value: object, limit: int) -> bool:
    """Whether `value`'s objects and arrays nest at most `limit` deep (walked
    without recursion: it may nest deeper than Python recurses)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def _assistant_blocks(message: ChatMessage) -> list[Block]:
    blocks: list[Block] = [{"type": "text", "text": message.content}] if message.content else []
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
        for c in message.tool_calls
    ]
    return blocks


async def _blocks(message: ChatMessage) -> tuple[str, list[Block]]:
    if message.role is Role.SYSTEM:
        return "user", [{"type": "text", "text": reminder_text(message.content)}]
    if message.role is Role.ASSISTANT:
        return "assistant", _assistant_blocks(message)
    if message.role is Role.TOOL:
        block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if message.media:  # an MCP tool's images: inside the result, as the API allows
            return "user", [{**block, "content": await _user_blocks(message)}]
        return "user", [{**block, "content": message.content}]
    return "user", await _user_blocks(message)


def _system_breakpoints(markers: Sequence[str | None]) -> set[int]:
    """Which `system` blocks carry a breakpoint: the agent prompt's (the
    stable part: it stays when a compaction replaces the summary) and the last."""
    if not markers:
        return set()
    last = len(markers) - 1
    if Marker.AGENT_PROMPT in markers:
        stable = markers.index(Marker.AGENT_PROMPT)
    elif Marker.HISTORY_COMPACTION in markers:
        stable = markers.index(Marker.HISTORY_COMPACTION) - 1
    else:
        stable = last
    return {i for i in (stable, last) if i >= 0}


@dataclass(slots=True)
class AnthropicPrompt:
    """The `system` and `messages` parameters, and where the history ends."""

    system: list[Block] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    system_markers: list[str | None] = field(default_factory=list)
    history_end: Block | None = None  # the last block before the tail

    def mark_cache(self, tools: list[Block], ttl: CacheTTL) -> None:
        """Put the breakpoints on the stable prefix (see the module docstring)."""
        control: Block = {"type": "ephemeral"}
        if ttl is not CacheTTL.FIVE_MINUTES:  # the default; left out for older endpoints
            control["ttl"] = ttl.value
        marked: list[Block] = tools[-1:]
        marked += [self.system[i] for i in sorted(_system_breakpoints(self.system_markers))]
        if self.history_end is not None:
            marked.append(self.history_end)
        for block in marked[:MAX_BREAKPOINTS]:
            block["cache_control"] = dict(control)


Turns = list[tuple[str, list[Block]]]


async def _append(turns: Turns, message: ChatMessage) -> None:
    if message.role is Role.SYSTEM and not message.content:
        return
    role, blocks = await _blocks(message)
    if not blocks:
        return
    if turns and turns[-1][0] == role:
        turns[-1][1].extend(blocks)
    else:
        turns.append((role, blocks))


async def to_anthropic_prompt(
    messages: Sequence[ChatMessage], tail: Sequence[ChatMessage] = ()
) -> AnthropicPrompt:
    """Map a request's messages (and its tail, after them) to Anthropic's shape."""
    prompt = AnthropicPrompt()
    start = 0
    while start < len(messages) and messages[start].role is Role.SYSTEM:
        message = messages[start]
        if message.content:
            prompt.system.append({"type": "text", "text": message.content})
            prompt.system_markers.append(message.marker)
        start += 1
    turns: Turns = []
    for message in messages[start:]:
        await _append(turns, message)
    for role, blocks in turns:
        if role == "user":  # tool_result blocks must lead their user turn
            blocks.sort(key=lambda b: b["type"] != "tool_result")
    prompt.history_end = turns[-1][1][-1] if turns else None
    for message in tail:  # text only: it stays behind any tool_result it joins
        await _append(turns, message)
    prompt.messages = [{"role": role, "content": blocks} for role, blocks in turns]
    return prompt


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[Block]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
