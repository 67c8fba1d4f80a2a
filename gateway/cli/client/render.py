"""How a reply looks in the terminal: its Markdown rendered off screen by rich
into ANSI text that prompt_toolkit prints above the prompt.

Links are where the two disagree. rich writes a link as an OSC 8 hyperlink
(ESC ] 8 ; params ; url ESC \\ text ESC ] 8 ; ; ESC \\); prompt_toolkit's ANSI
parser knows only CSI sequences, drops the ESC ] and prints the rest, which
showed as `8;id=…;https://…` garbage. So a terminal that takes hyperlinks
gets each OSC 8 sequence as a zero-width escape (written raw, counted as no
width), and any other output gets the link as `text (url)` laid out by rich
itself. This module never writes to the terminal.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markdown import Markdown

__all__ = ["hyperlinks_supported", "keep_line_breaks", "render_markdown", "tool_line"]

# rich's OSC 8 sequences: ESC ] 8 ; params ; url, ended by ST (ESC \) or BEL
_OSC8 = re.compile(r"\x1b\]8;[^\x07\x1b]*(?:\x1b\\|\x07)")
# the terminals known to print OSC 8 as text, or to be unable to show it
_NO_HYPERLINKS = ("dumb", "linux", "cons25", "emacs")


def hyperlinks_supported(environ: Mapping[str, str], isatty: bool) -> bool:
    """Whether to send real OSC 8 hyperlinks: a terminal, not one of those
    known to show them as text. PICOBOT_HYPERLINKS=0 or 1 decides instead
    (for a terminal that guesses wrong)."""
    forced = environ.get("PICOBOT_HYPERLINKS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    if not isatty:
        return False
    term = environ.get("TERM", "")
    if not term or term.startswith(_NO_HYPERLINKS):
        return False
    # GNU screen swallows or mangles OSC 8; tmux (which also says "screen") passes it
    return not (term.startswith("screen") and "TMUX" not in environ)


def tool_line(frame: dict[str, Any]) -> str | None:
    """A finished tool call as one line (`tool` frame, PROTOCOL.md); None while it runs."""
    status = frame.get("status")
    if status not in ("ok", "error"):
        return None
    secs = frame.get("secs")
    took = f" {secs:.1f}s" if isinstance(secs, int | float) else ""
    return f"🔧 {frame.get('name')}({frame.get('summary')}) {status}{took}"


def keep_line_breaks(text: str) -> str:
    """Chat replies mean their single newlines; Markdown would join the lines.
    Hard breaks (two trailing spaces) everywhere except inside code fences."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        fence = line.lstrip().startswith("```")
        if fence:
            fenced = not fenced
        out.append(line if fence or fenced or not line.strip() else line + "  ")
    return "\n".join(out)


def _plain_links(markdown: Markdown) -> Markdown:
    """`text (url)` for every link but an autolink (`<https://…>`), whose
    text is its url already: that one stays bare text, not `url (url)`."""
    for block in markdown.parsed:
        children = block.children or []
        drop: set[int] = set()
        for i, token in enumerate(children[:-2]):
            if token.type != "link_open":
                continue
            text, close = children[i + 1], children[i + 2]
            href = str(token.attrs.get("href", ""))
            if (
                close.type == "link_close"
                and text.type == "text"
                and href in (text.content, f"mailto:{text.content}")
            ):
                drop.update((i, i + 2))
        if drop:
            block.children = [t for n, t in enumerate(children) if n not in drop]
    return markdown


def render_markdown(text: str, width: int, *, color: bool = True, hyperlinks: bool = False) -> str:
    """The reply as the terminal shows it: ANSI text, for prompt_toolkit's
    `ANSI`. `hyperlinks`: real OSC 8 links (wrapped in \\001…\\002, which
    prompt_toolkit writes raw); otherwise `text (url)`. Without `color`
    (NO_COLOR) bold and underline stay, colours go."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=True,
        width=width,
        color_system="standard",  # None would drop the links' OSC 8 as well
        no_color=not color,
    )
    markdown = Markdown(keep_line_breaks(text), hyperlinks=hyperlinks)
    console.print(markdown if hyperlinks else _plain_links(markdown))
    rendered = buffer.getvalue().rstrip("\n")
    if hyperlinks:
        return _OSC8.sub(lambda m: f"\001{m.group(0)}\002", rendered)
    return _OSC8.sub("", rendered)  # none expected; never let one through as text
