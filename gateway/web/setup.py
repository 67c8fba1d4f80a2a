"""The web surface's parts for the composition root: what the WebSocket
channel reads the store through (its chat directory and chat owners), and
the web UI, mounted on the HTTP app last (it answers every other GET; the
console's API is mounted before it, by gateway.console)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from gateway.commands import CommandRegistry
from gateway.i18n import Locale
from gateway.web.directory import StoreDirectory
from gateway.web.owners import StoreChatOwners
from gateway.web.replies import StoreReplyArchive
from gateway.web.static import PACKAGED_ROOT, StaticSite
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
        """The web UI for every GET no other route took (mounted last)."""
        site = StaticSite(static_dir or PACKAGED_ROOT)
        app.router.add_get("/{tail:.*}", site.handle)
