"""The web tools `http_request` and `web_fetch`.

Both go through `netguard.guarded_fetch`, so the address policy, redirect
re-checks, timeout and byte cap apply to every request; this module must never
open a connection by any other route. `web_fetch` turns HTML into readable,
Markdown-like text with the stdlib parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html.parser import HTMLParser
from typing import ClassVar, Literal
from urllib.parse import urljoin

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolSettings
from agent.tools.netguard import AddressPolicy, FetchedResponse, IPNetwork, guarded_fetch

__all__ = ["HttpRequestTool", "WebFetchTool", "html_to_markdown"]

USER_AGENT = "picobot/0.1 (+https://github.com/picobot)"
_SHOWN_HEADERS = (
    "Content-Type",
    "Content-Length",
    "Location",
    "Last-Modified",
    "ETag",
    "Retry-After",
    "WWW-Authenticate",
)
_TEXTUAL_TYPES = re.compile(
    r"^(text/.*|application/(json|.*\+json|xml|.*\+xml|javascript|x-www-form-urlencoded)|)$"
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# ---------------------------------------------------------------- HTML → text

_SKIPPED = frozenset({"script", "style", "nav", "noscript", "template", "svg", "iframe", "head"})
_BLOCKS = frozenset(
    {"p", "div", "section", "article", "main", "header", "footer", "aside", "ul", "ol",
     "table", "tr", "blockquote", "figure", "figcaption", "dl", "dt", "dd", "form", "hr"}
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


class _MarkdownBuilder(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.title = ""
        self._out: list[str] = []
        self._skip = 0
        self._pre = 0
        self._in_title = False
        self._links: list[tuple[str | None, int]] = []

    def _emit(self, text: str) -> None:
        self._out.append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if tag in _SKIPPED:
            self._skip += 1
            return
        if self._skip:
            return
        if tag in _HEADINGS:
            self._emit("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag in _BLOCKS:
            self._emit("\n\n")
        elif tag == "br":
            self._emit("\n")
        elif tag == "li":
            self._emit("\n- ")
        elif tag == "a":
            self._links.append((dict(attrs).get("href"), len(self._out)))
        elif tag == "pre":
            self._emit("\n\n```\n")
            self._pre += 1
        elif tag == "code" and not self._pre:
            self._emit("`")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag in _HEADINGS or tag in _BLOCKS:
            self._emit("\n\n")
        elif tag == "a" and self._links:
            href, start = self._links.pop()
            text = " ".join("".join(self._out[start:]).split())
            del self._out[start:]
            if text and href and not href.lower().startswith(("javascript:", "data:")):
                self._emit(f"[{text}]({urljoin(self.base_url, href.strip())})")
            else:
                self._emit(text)
        elif tag == "pre" and self._pre:
            self._pre -= 1
            self._emit("\n```\n\n")
        elif tag == "code" and not self._pre:
            self._emit("`")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip:
            return
        elif self._pre:
            self._emit(data)
        else:
            self._emit(re.sub(r"\s+", " ", data))

    def markdown(self) -> str:
        lines: list[str] = []
        fenced = False
        for line in "".join(self._out).split("\n"):
            if line.strip() == "```":
                fenced = not fenced
                lines.append("```")
            elif fenced:
                lines.append(line.rstrip())
            else:
                lines.append(" ".join(line.split()))
        text = "\n".join(lines)
        return re.sub(r"\n{3,}", "\n\n", text).strip()


def html_to_markdown(html: str, base_url: str = "") -> tuple[str, str]:
    """(title, text) of an HTML page: headings, paragraphs, lists, [links](href)."""
    builder = _MarkdownBuilder(base_url)
    builder.feed(html)
    builder.close()
    return " ".join(builder.title.split()), builder.markdown()


# ---------------------------------------------------------------- tools


def _policy(settings: ToolSettings, exempt: Sequence[IPNetwork]) -> AddressPolicy:
    return AddressPolicy(allow_private=settings.http_allow_private, exempt=tuple(exempt))


def _is_textual(response: FetchedResponse) -> bool:
    return bool(_TEXTUAL_TYPES.match(response.content_type)) and b"\x00" not in response.body[:4096]


def _truncation_note(response: FetchedResponse, max_bytes: int) -> str:
    if not response.truncated:
        return ""
    return f"\n[truncated: the response body exceeded {max_bytes} bytes]"


class HttpRequestArgs(ToolArgs):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "GET"
    url: str = Field(description="http(s) URL")
    headers: dict[str, str] | None = None
    body: str | None = None


class HttpRequestTool(Tool[HttpRequestArgs]):
    name: ClassVar[str] = "http_request"
    description: ClassVar[str] = (
        "Send an HTTP request; returns status, headers and body. Private and "
        "local addresses are refused unless allowed."
    )
    Args: ClassVar[type[ToolArgs]] = HttpRequestArgs

    def __init__(self, exempt_networks: Sequence[IPNetwork] = ()) -> None:
        self._exempt = tuple(exempt_networks)

    async def run(self, args: HttpRequestArgs, ctx: ToolContext) -> str:
        settings = ctx.settings
        headers = {"User-Agent": USER_AGENT, **(args.headers or {})}
        response = await guarded_fetch(
            args.method,
            args.url,
            policy=_policy(settings, self._exempt),
            timeout_secs=settings.http_timeout_secs,
            max_bytes=settings.http_max_bytes,
            headers=headers,
            body=args.body,
        )
        lines = [f"status: {response.status} {response.reason}".rstrip()]
        if response.redirects:
            lines.append(f"final_url: {response.url}")
        lines += [
            f"{name.lower()}: {response.headers[name]}"
            for name in _SHOWN_HEADERS
            if name in response.headers
        ]
        if not response.body:
            body = "(empty body)"
        elif _is_textual(response):
            body = response.text() + _truncation_note(response, settings.http_max_bytes)
        else:
            more = "+" if response.truncated else ""
            body = f"[binary body: {len(response.body)}{more} bytes of {response.content_type}]"
        return "\n".join(lines) + "\n\n" + body


class WebFetchArgs(ToolArgs):
    url: str = Field(description="http(s) URL")
    max_chars: int | None = Field(default=None, ge=100)


class WebFetchTool(Tool[WebFetchArgs]):
    name: ClassVar[str] = "web_fetch"
    description: ClassVar[str] = (
        "Fetch a web page as readable text (links as [text](url)); private and local "
        "addresses are refused."
    )
    Args: ClassVar[type[ToolArgs]] = WebFetchArgs

    default_max_chars: ClassVar[int] = 20_000

    def __init__(self, exempt_networks: Sequence[IPNetwork] = ()) -> None:
        self._exempt = tuple(exempt_networks)

    async def run(self, args: WebFetchArgs, ctx: ToolContext) -> str:
        settings = ctx.settings
        response = await guarded_fetch(
            "GET",
            args.url,
            policy=_policy(settings, self._exempt),
            timeout_secs=settings.http_timeout_secs,
            max_bytes=settings.http_max_bytes,
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            },
        )
        if response.status >= 400:
            raise ToolError(f"fetching {response.url} failed with HTTP {response.status}")
        if not _is_textual(response):
            raise ToolError(f"{response.url} is not a text page ({response.content_type})")
        title = ""
        text = response.text()
        if response.content_type in _HTML_TYPES or (
            not response.content_type and "<html" in text[:1000].lower()
        ):
            title, text = html_to_markdown(text, response.url)
        limit = args.max_chars or self.default_max_chars
        notes = _truncation_note(response, settings.http_max_bytes)
        if len(text) > limit:
            text = text[:limit]
            notes += f"\n[truncated to {limit} characters]"
        header = f"url: {response.url}\n" + (f"title: {title}\n" if title else "")
        return f"{header}\n{text}{notes}"
