"""Shared helpers for the WeChat channel tests (no tests here).

`wechat_runtime` is tests/channel_runtime.py's `channel_runtime` with two extras
the WeChat tests need: state seeded before `start()` (a restart with the same
cursor and context tokens) and a bus that counts every `submit`, so replays the
adapter itself filters are visible.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

from channels.wechat import WechatChannel, WechatConfig
from channels.wechat.credentials import Credentials, save_credentials
from gateway.bus import InboundMessage, MessageBus, Receipt
from tests.channel_runtime import TestRuntime
from tests.fakes.wechat_server import FakeWechat


class CountingBus(MessageBus):
    def __init__(self) -> None:
        super().__init__(inbound_capacity=64)
        self.submitted: list[InboundMessage] = []

    async def submit(self, message: InboundMessage) -> Receipt:
        self.submitted.append(message)
        return await super().submit(message)


def make_config(fake: FakeWechat, **extra: object) -> WechatConfig:
    return WechatConfig.model_validate(
        {
            "enabled": True,
            "base_url": fake.base_url,
            "cdn_base_url": fake.cdn_base_url,
            "poll_timeout_secs": 2,
            "retry_delay_secs": 0.01,
            "backoff_secs": 0.05,
            "credential_check_secs": 0.02,
            "typing_interval_secs": 0.05,
            **extra,
        }
    )


def write_credentials(home: Path, fake: FakeWechat) -> Path:
    """Where the channel looks by default: <home>/wechat/credentials.json."""
    path = home / "wechat" / "credentials.json"
    save_credentials(path, Credentials(fake.token, fake.bot_id, fake.base_url, fake.owner_id))
    return path


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """For state with no event to await (readiness flags): check every 5 ms, bounded."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


@asynccontextmanager
async def wechat_runtime(
    channel: WechatChannel, home: Path, state: dict[str, str] | None = None
) -> AsyncIterator[TestRuntime]:
    """Media under <home>/media, so the default credentials path is <home>/wechat/…"""
    runtime = TestRuntime(home / "media")
    runtime.bus = CountingBus()
    runtime.state.values.update(state or {})
    channel.setup(runtime)  # iLink is polled: no webhook routes to serve
    consumer = asyncio.create_task(runtime._consume(), name="test-runtime-consumer")
    try:
        await channel.start()
        yield runtime
    finally:
        await channel.stop()
        consumer.cancel()
        with suppress(asyncio.CancelledError):
            await consumer
