"""`ChannelLeases`: a channel's one connection and its sends, on one worker
at a time (docs/scale-out.md).

`channel:<name>` is held by one worker. It sends the channel's outbox (so a
chat's replies leave in order, whichever worker wrote them: the others tell it
by notification), and, for a channel whose platform allows one connection per
account (`Channel.exclusive_connection`: Telegram long polling, Feishu's long
connection, WeChat iLink), it alone starts the channel. The other workers
stand by and try again at every heartbeat and as soon as a worker leaves.

Channels whose recipients are connected to one worker (the WebSocket clients,
the API's waiting requests: `local_channels`) are leased by nobody: every
worker sends their rows to its own recipients, and a row for a recipient
connected elsewhere is parked and announced (`announce`) so that the worker
that has the recipient takes it.

A worker that finds it lost an exclusive channel's lease (it was paused or cut
off past `lease_secs` and another worker took the channel) stops the channel
at once and stands by again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping

import structlog

from channels.base import Channel
from gateway.cluster.worker import ClusterWorker
from gateway.lifecycle import cancel_and_wait
from storage.database import STORAGE_ERRORS
from storage.sql.cluster import CHANNEL_PREFIX, channel_key

__all__ = ["ChannelLeases", "ExclusiveChannel"]

log = structlog.get_logger(__name__)

_ANNOUNCE_MAX = 4096  # (channel, chat) pairs waiting to be announced


class ChannelLeases:
    name = "channel leases"

    def __init__(
        self,
        worker: ClusterWorker,
        channels: Mapping[str, Channel],
        local_channels: Collection[str],
    ) -> None:
        self.worker = worker
        self.channels = channels
        self.local = frozenset(local_channels)
        self.leased = [n for n in channels if n not in self.local]
        self._held = {n: asyncio.Event() for n in self.leased}
        self._try = asyncio.Event()
        self._announce: dict[tuple[str, str | None, int | None], None] = {}
        self._announced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.exclusive: dict[str, ExclusiveChannel] = {}
        self.on_taken: list[Callable[[str], None]] = []  # the dispatcher's wake
        self.on_lost_channel: list[Callable[[str], None]] = []

    # -- what the dispatcher asks ------------------------------------------------
    def sends(self, name: str) -> bool:
        """Whether this worker sends `name`'s outbox rows now."""
        return name in self.local or channel_key(name) in self.worker.held

    async def wait_sending(self, name: str) -> None:
        await self._held[name].wait()

    def announce(self, name: str, chat_id: str | None, sent: int | None = None) -> None:
        """Rows of `name` (for `chat_id`) were committed or parked here: tell the
        worker that sends them; or row `sent` went to the recipients connected
        here: the other workers' recipients of the chat get it too. Coalesced;
        sent by the notifier task."""
        if sent is not None and self.worker.alone:
            return  # no other worker has recipients to copy it to
        if len(self._announce) < _ANNOUNCE_MAX:
            self._announce[(name, chat_id, sent)] = None
        self._announced.set()

    # -- lifecycle --------------------------------------------------------------
    async def start(self, tg: asyncio.TaskGroup) -> None:
        self.worker.subscribers.on_beat.append(self._try.set)
        self.worker.subscribers.on_lost.append(self._lost)
        await self._take()
        self._tasks = [
            tg.create_task(self._taker(), name="channel-leases"),
            tg.create_task(self._announcer(), name="outbox-announcer"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)

    async def _taker(self) -> None:
        while True:
            await self._try.wait()
            self._try.clear()
            try:
                await self._take()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next beat tries again
                log.warning("channel_lease_take_failed", error=type(exc).__name__)

    async def _take(self) -> None:
        wanted = [channel_key(n) for n in self.leased if channel_key(n) not in self.worker.held]
        if not wanted:
            return
        holders = await self.worker.store.cluster.acquire(self.worker.id, wanted)
        for key in wanted:
            holder = holders.get(key)
            if holder is None or holder.owner != self.worker.id:
                continue
            name = key[len(CHANNEL_PREFIX) :]
            self.worker.took(key, holder.token)
            log.info("channel_lease_taken", channel=name, token=holder.token)
            self._held[name].set()
            for hook in self.on_taken:
                hook(name)

    def _lost(self, keys: list[str]) -> None:
        for key in keys:
            if not key.startswith(CHANNEL_PREFIX):
                continue
            name = key[len(CHANNEL_PREFIX) :]
            if name not in self._held:
                continue
            self._held[name].clear()
            log.warning("channel_lease_lost", channel=name)
            for hook in self.on_lost_channel:
                hook(name)
            if name in self.exclusive:
                self.exclusive[name].lost()

    async def _announcer(self) -> None:
        while True:
            await self._announced.wait()
            self._announced.clear()
            pending, self._announce = list(self._announce), {}
            for name, chat_id, sent in pending:
                try:
                    await self.worker.notify(
                        {"k": "outbox", "ch": name, "chat": chat_id, "sent": sent}
                    )
                except STORAGE_ERRORS as exc:  # the holder's rescan finds the rows later
                    log.warning("outbox_announce_failed", error=type(exc).__name__)

    def standby(self, name: str) -> bool:
        """An exclusive channel this worker does not run (another worker does)."""
        exclusive = self.exclusive.get(name)
        return exclusive is not None and not exclusive.running

    def service(self, channel: Channel) -> ExclusiveChannel:
        """The Service that starts `channel` only while this worker holds its lease."""
        held = self._held[channel.name]
        exclusive = ExclusiveChannel(channel, held, self.worker)
        self.exclusive[channel.name] = exclusive
        return exclusive


class ExclusiveChannel:
    """A channel with one connection per account, run while its lease is held."""

    def __init__(self, channel: Channel, held: asyncio.Event, worker: ClusterWorker) -> None:
        self.channel = channel
        self.held = held
        self.worker = worker
        self.name = f"channel {channel.name}"
        self.running = False
        self._task: asyncio.Task[None] | None = None
        self._stop_now = asyncio.Event()

    async def start(self, tg: asyncio.TaskGroup) -> None:
        if self.held.is_set():
            await self.channel.start()
            self.running = True
        else:
            log.info("channel_standby", channel=self.channel.name)
        self._task = tg.create_task(self._run(), name=f"exclusive:{self.channel.name}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self.running:
            self.running = False
            await self.channel.stop()

    def lost(self) -> None:
        self._stop_now.set()

    async def _run(self) -> None:
        """Start on taking the lease; stop on losing it."""
        while True:
            if not self.running:
                await self.held.wait()
                try:
                    await self.channel.start()
                except asyncio.CancelledError:
                    raise
                except Exception:  # let another worker try
                    log.exception("channel_start_failed", channel=self.channel.name)
                    await self._give_up()
                    continue
                self.running = True
                log.info("channel_taken_over", channel=self.channel.name)
            await self._stop_now.wait()
            self._stop_now.clear()
            if self.running and not self.held.is_set():
                self.running = False
                await self.channel.stop()  # another worker polls now
                log.warning("channel_stopped_lease_lost", channel=self.channel.name)

    async def _give_up(self) -> None:
        key = channel_key(self.channel.name)
        self.held.clear()
        self.worker.let_go(key)
        try:
            await self.worker.store.cluster.release(self.worker.id, [key])
        except STORAGE_ERRORS as exc:
            log.warning("channel_lease_release_failed", error=type(exc).__name__)
        await asyncio.sleep(self.worker.lease_secs)  # not straight back: another may do better
