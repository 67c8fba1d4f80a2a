"""A real `picobot gateway` process against peers that send more than they declare."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support import child_env, process_config, spawn_gateway

pytestmark = pytest.mark.slow

CAP = 65536


def _peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def _config(llm: FakeOpenAI, channels: dict[str, Any]) -> dict[str, Any]:
    return process_config(
        llm.base_url,
        gateway={"outbound_retry_base_secs": 0.05},
        channels={"websocket": {"enabled": False}, **channels},
    )


async def test_a_telegram_file_streaming_50_mb_past_a_1_kb_getfile_costs_only_the_cap(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        warm_id = tg.add_file(b"a small honest file", "documents/warm.txt")
        liar_id, liar = tg.add_streamed_file(declared=1024, total=50_000_000)
        config = _config(llm, {"telegram": tg.settings(max_media_bytes=CAP)})
        gw = await spawn_gateway(config, home, child_env(home))
        try:
            # one honest download first, so the peak below is that of a warm process
            await tg.add_message(
                "warm up",
                document={"file_id": warm_id, "file_unique_id": "w1", "file_name": "warm.txt"},
            )
            await tg.wait_for(lambda: len(tg.sent_texts) == 1, timeout=20)
            before = _peak_rss(gw.proc.pid)
            await tg.add_message(
                "see attached",
                document={"file_id": liar_id, "file_unique_id": "z1", "file_name": "liar.bin"},
            )
            await tg.wait_for(lambda: len(tg.sent_texts) == 2, timeout=20)
            await asyncio.wait_for(liar.done.wait(), 10)
            grew = _peak_rss(gw.proc.pid) - before
        finally:
            assert await gw.stop() == 0
    # the agent was told the file was left out, and why
    assert tg.sent_texts[1] == f"echo: see attached\n[file omitted: larger than {CAP} bytes]"
    # the gateway hung up after the cap: the fake got to write a few socket
    # buffers, not 50 MB, and the process's peak memory did not follow the stream
    assert liar.sent < 10_000_000, liar.sent
    assert grew < 20_000_000, grew
    assert not list((home / "media" / "telegram").glob("*liar*"))
