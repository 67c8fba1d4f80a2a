"""The web surface's parts for the composition root: what the WebSocket
channel reads the store through (its chat directory and chat owners), and
the web UI, mounted on the HTTP app last (it answers every other GET; the
console's API is mounted before it, by gateway.console)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from gateway.commands import CommandRegistry
from gateway.i18n import Locale, parse_locale
from gateway.i18n.page import page_table
from gateway.web.directory import StoreDirectory
from gateway.web.owners import StoreChatOwners
from gateway.web.replies import StoreReplyArchive
from gateway.web.static import PACKAGED_ROOT, StaticSite, secure
from storage.store import Store

__all__ = ["WebFeature"]


@dataclass(frozen=True, slots=True)
class WebFeature:
    store: Store
    commands: CommandRegistry

    def directory(self, channel: str, locale: Locale) -> StoreDirectory:
        return StoreDirectory(self.store, self.commands, channel, locale)

    def owners(self, channel: str) -> StoreChatOwners:
        return StoreChatOwners(self.store, channel)

    def replies(self, channel: str) -> StoreReplyArchive:
        return StoreReplyArchive(self.store, channel)

    def mount(self, app: web.Application, static_dir: Path | None) -> None:
        """The page's texts, then the web UI for every GET no other route took
        (mounted last)."""
        app.router.add_get("/i18n/{locale}.json", page_texts)
        site = StaticSite(static_dir or PACKAGED_ROOT)
        app.router.add_get("/{tail:.*}", site.handle)


async def page_texts(request: web.Request) -> web.StreamResponse:
    """One language's page texts (gateway.i18n.page): no data, no token."""
    locale = parse_locale(request.match_info["locale"])
    if locale is None:
        return secure(web.Response(status=404, text="no such language\n"))
    response = web.Response(body=page_table(locale), content_type="application/json")
    response.headers["Cache-Control"] = "no-cache"
    return secure(response)
