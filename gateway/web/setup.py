"""The web surface's parts for the composition root: what the WebSocket
channel reads the store through (its chat directory and chat owners), and the
operator API and the web UI, mounted on the HTTP app (the UI last: it answers
every other GET)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from gateway.commands import CommandRegistry
from gateway.config.core import Config
from gateway.i18n import Locale
from gateway.web.directory import StoreDirectory
from gateway.web.ops import JobsView, OpsApi
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

    def mount(
        self,
        app: web.Application,
        config: Config,
        checks: Callable[[], list[tuple[str, str | None]]],
        wake: Callable[[str], None],
        jobs_view: JobsView,
        static_dir: Path | None,
    ) -> None:
        """The operator API, then the web UI for every other GET (mounted last)."""
        token = config.gateway.auth_token
        OpsApi(
            self.store,
            token.get_secret_value() or None if token else None,
            checks,
            wake,
            jobs_view,
            config.channels.websocket.allowed_origins,
            exposed=not config.gateway.loopback_only,
        ).mount(app)
        site = StaticSite(static_dir or PACKAGED_ROOT)
        app.router.add_get("/{tail:.*}", site.handle)
