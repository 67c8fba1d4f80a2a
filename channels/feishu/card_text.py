"""Text of the Feishu messages that are not plain text: cards and shares.

An `interactive` message reaches the bot in one of two shapes (uncertain
which, so both are read): the event's simplified form, post-like paragraphs
`{"title", "elements": [[{"tag": "text", "text"}, …], …]}`, or the card JSON
itself (`header.title`, `elements` / `body.elements` with markdown, div,
plain_text, lark_md, note, column_set, button…). Every visible string is kept
in reading order; the model needs the words, not the layout. Shared chats and
users become a short line naming them. (A merged forward needs the API for its
messages: `channels.feishu.inbound` fetches them.)
"""

from __future__ import annotations

from typing import Any

__all__ = ["card_text", "shared_text"]

_TEXT_TAGS = frozenset({"text", "plain_text", "lark_md", "markdown", "md"})
_MAX_DEPTH = 12  # cards nest columns in columns; a hostile body must not recurse forever


def card_text(content: dict[str, Any]) -> str:
    lines: list[str] = []
    title = content.get("title")
    header = content.get("header")
    if isinstance(header, dict):
        head = header.get("title")
        title = head.get("content") if isinstance(head, dict) else title
    if isinstance(title, str) and title.strip():
        lines.append(title.strip())
    body = content.get("body")
    elements = body.get("elements") if isinstance(body, dict) else content.get("elements")
    for block in elements if isinstance(elements, list) else []:
        # the simplified form has paragraphs (lists); the card JSON has elements
        parts: list[str] = []
        _collect(block, parts, 0)
        line = ("" if isinstance(block, list) else "\n").join(p for p in parts if p)
        if line.strip():
            lines.append(line.strip())
    return "\n".join(lines)


def _collect(node: Any, out: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, list):
        for item in node:
            _collect(item, out, depth + 1)
        return
    if not isinstance(node, dict):
        return
    tag = node.get("tag")
    if tag in _TEXT_TAGS:
        value = node.get("content", node.get("text"))
        if isinstance(value, str):
            out.append(value)
            return
    if tag == "a":
        label, href = str(node.get("text", "")), str(node.get("href", ""))
        out.append(f"{label} ({href})" if href and href != label else label or href)
        return
    if tag == "at":
        out.append(f"@{node.get('user_name') or node.get('user_id', '')}")
        return
    if tag == "img":
        out.append("[image]")
        return
    for key, value in node.items():
        if key not in {"tag", "config", "behaviors", "value", "url", "multi_url"}:
            _collect(value, out, depth + 1)


def shared_text(msg_type: str, content: dict[str, Any]) -> str | None:
    if msg_type == "share_chat" and content.get("chat_id"):
        return f"[shared a chat: {content['chat_id']}]"
    if msg_type == "share_user" and content.get("user_id"):
        return f"[shared a contact: {content['user_id']}]"
    return None
