"""The web UI's files: `/` and every deep link answer the page (the UI routes
in the browser); its assets are served from the package, or from
`STATIC_DIR` on disk for development (read at each request, so edits show on
reload).

Static files carry no data and need no token. They are served with a strict
Content-Security-Policy (scripts and styles from this origin only, no inline
script) and `nosniff`. A path with a `..`, `.`, hidden or encoded-slash
segment is refused before the file system is touched, and what a path names
must resolve inside the root (no symlink escapes). Files are read off the
event loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final
from urllib.parse import unquote

from aiohttp import web

__all__ = ["CSP", "PACKAGED_ROOT", "SECURITY_HEADERS", "StaticSite", "secure"]

PACKAGED_ROOT: Final = Path(__file__).resolve().parent / "static"
INDEX: Final = "index.html"

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}

# the gateway's own routes: a miss under these is a 404, never the page
RESERVED: Final = frozenset(
    {"api", "ws", "webhooks", "health", "ready", "metrics", "i18n", "v1", "mcp"}
)

_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".webmanifest": "application/manifest+json",
    ".txt": "text/plain; charset=utf-8",
    ".map": "application/json",
}


def secure(response: web.StreamResponse) -> web.StreamResponse:
    response.headers.update(SECURITY_HEADERS)
    return response


class _Refused(Exception):
    """The request path tries to leave the root or name a hidden file."""


def _segments(raw_path: str) -> list[str]:
    """The decoded path segments; `_Refused` for anything but plain names."""
    path = raw_path.split("?", 1)[0].split("#", 1)[0]
    parts = path.split("/")[1:]
    if parts and parts[-1] == "":
        parts.pop()  # "/", "/chat/": a directory, which is the page
    decoded = []
    for part in parts:
        name = unquote(part, errors="strict")
        if not name or name.startswith(".") or any(c in name for c in "/\\\0"):
            raise _Refused(part)
        decoded.append(name)
    return decoded


class StaticSite:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            parts = _segments(request.raw_path)
        except (_Refused, UnicodeDecodeError):
            return secure(web.Response(status=404, text="not found\n"))
        if parts and parts[0] in RESERVED:
            return secure(web.Response(status=404, text="not found\n"))
        found = await asyncio.to_thread(self._read, parts)
        if found is None:
            if parts and Path(parts[-1]).suffix in _TYPES:  # an asset that is not there
                return secure(web.Response(status=404, text="not found\n"))
            found = await asyncio.to_thread(self._read, [INDEX])  # a deep link: the page
            if found is None:
                return secure(web.Response(status=500, text="the web UI is missing\n"))
        body, content_type = found
        response = web.Response(body=body, headers={"Content-Type": content_type})
        response.headers["Cache-Control"] = "no-cache"
        return secure(response)

    def _read(self, parts: list[str]) -> tuple[bytes, str] | None:
        path = self.root.joinpath(*parts) if parts else self.root / INDEX
        try:
            real = path.resolve(strict=True)
        except OSError:
            return None
        if not real.is_relative_to(self.root) or not real.is_file():
            return None
        return real.read_bytes(), _TYPES.get(real.suffix, "application/octet-stream")
