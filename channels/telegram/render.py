"""Markdown (as LLMs write it) → Telegram's HTML parse mode.

Supports fenced and inline code, bold, italic, strikethrough, links and
headings; everything else is escaped text. Spans the Markdown lets cross
("**bold _both** italic_") are re-nested (`_nest`: a tag closed under another
closes that one and opens it again after), so Telegram's parser, which wants
properly nested tags, takes the part with all its formatting. Should Telegram
still refuse it, the sender retries the same part as plain text; `<`, `>` and
`&` are always escaped.
"""

from __future__ import annotations

import html
import re

__all__ = ["markdown_to_html"]

_FENCE = re.compile(r"```([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+|tg://[^\s)]+|mailto:[^\s)]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__", re.DOTALL)
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_ITALIC_UNDERSCORE = re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")
# Every "<" left in the output starts one of our tags: text and code were escaped.
_TAG = re.compile(r"<(/?)([a-z]+)[^>]*>")
_EMPTY = re.compile(r"<([a-z]+)[^>]*></\1>")


def markdown_to_html(text: str) -> str:
    """Render `text` for `parse_mode=HTML`; visible length never grows."""
    stash: list[str] = []

    def keep(fragment: str) -> str:
        stash.append(fragment)
        return f"\x00{len(stash) - 1}\x00"

    def fence(match: re.Match[str]) -> str:
        lang, body = match.group(1), match.group(2).rstrip("\n")
        code = html.escape(body, quote=False)
        if lang:
            return keep(f'<pre><code class="language-{html.escape(lang)}">{code}</code></pre>')
        return keep(f"<pre>{code}</pre>")

    text = text.replace("\x00", "")
    text = _FENCE.sub(fence, text)
    text = _INLINE_CODE.sub(
        lambda m: keep(f"<code>{html.escape(m.group(1), quote=False)}</code>"), text
    )
    text = html.escape(text, quote=False)
    text = _LINK.sub(
        lambda m: (
            keep(f'<a href="{html.escape(html.unescape(m.group(2)))}">') + m.group(1) + keep("</a>")
        ),
        text,
    )
    text = _HEADING.sub(r"<b>\1</b>", text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _STRIKE.sub(r"<s>\1</s>", text)
    text = _ITALIC_STAR.sub(r"<i>\1</i>", text)
    text = _ITALIC_UNDERSCORE.sub(r"<i>\1</i>", text)
    return _nest(_PLACEHOLDER.sub(lambda m: stash[int(m.group(1))], text))


def _nest(markup: str) -> str:
    """The same markup with crossing tags split so that they nest:
    `<b>a <i>b</b> c</i>` → `<b>a <i>b</i></b><i> c</i>`; a close tag that
    matches nothing open is dropped, tags left open are closed at the end."""
    out: list[str] = []
    open_tags: list[tuple[str, str]] = []  # (name, the open tag as written)
    at = 0
    for match in _TAG.finditer(markup):
        out.append(markup[at : match.start()])
        at = match.end()
        closing, name = match.group(1) == "/", match.group(2)
        if not closing:
            open_tags.append((name, match.group(0)))
            out.append(match.group(0))
            continue
        depth = next((i for i in range(len(open_tags) - 1, -1, -1) if open_tags[i][0] == name), -1)
        if depth < 0:
            continue
        above = open_tags[depth + 1 :]
        out.extend(f"</{tag}>" for tag, _ in reversed(above))
        out.append(f"</{name}>")
        out.extend(written for _, written in above)
        del open_tags[depth]
    out.append(markup[at:])
    out.extend(f"</{tag}>" for tag, _ in reversed(open_tags))
    result = "".join(out)
    while (emptied := _EMPTY.sub("", result)) != result:
        result = emptied
    return result
