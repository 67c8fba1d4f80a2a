"""`LiveProgress`: one message per chat and turn, posted once, edited to the latest text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from channels.base import PermanentSendError, RateLimited
from channels.progress import LiveProgress, progress_line, progress_text
from gateway.bus import ChannelEvent, EventKind, ToolActivity, ToolStatus


def event(calls: Iterable[ToolActivity], chat: str = "c1", run: str = "r1") -> ChannelEvent:
    return ChannelEvent(EventKind.TOOL, "x", chat, "s", run, tool_calls=tuple(calls))


RUNNING = ToolActivity("1", "read", "path=a.md")
DONE = ToolActivity("1", "read", "path=a.md", ToolStatus.OK, 0.25)
OTHER = ToolActivity("2", "bash", "command=ls", ToolStatus.ERROR, 1.0)


def test_lines_show_name_arguments_status_and_duration() -> None:
    assert progress_line(RUNNING) == "🔧 read(path=a.md) …"
    assert progress_line(DONE) == "🔧 read(path=a.md) ✓ ok 0.2s"
    assert (
        progress_text([DONE, OTHER])
        == "🔧 read(path=a.md) ✓ ok 0.2s\n🔧 bash(command=ls) ✗ error 1.0s"
    )


class Platform:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (op, handle, text)
        self.changed = asyncio.Condition()
        self.fail: list[Exception] = []

    async def post(self, ev: ChannelEvent, text: str) -> str:
        return await self._do("post", f"m-{ev.chat_id}-{ev.run_id}", text)

    async def edit(self, ev: ChannelEvent, handle: str, text: str) -> None:
        await self._do("edit", handle, text)

    async def _do(self, op: str, handle: str, text: str) -> str:
        async with self.changed:
            self.changed.notify_all()
            if self.fail:
                raise self.fail.pop(0)
            self.calls.append((op, handle, text))
        return handle

    async def shows(self, handle: str, text: str) -> None:
        async with asyncio.timeout(5), self.changed:
            await self.changed.wait_for(lambda: any(c[1:] == (handle, text) for c in self.calls))


async def test_a_turn_is_one_message_edited_until_it_shows_the_latest_calls() -> None:
    platform = Platform()
    live = LiveProgress(platform.post, platform.edit, min_interval=0.01, name="t")
    live.show(event([RUNNING]))
    live.show(event([DONE]))  # before the first push: only the latest goes out
    live.show(event([DONE, OTHER]))
    await platform.shows("m-c1-r1", progress_text([DONE, OTHER]))
    live.show(event([RUNNING], run="r2"))  # the next turn: a message of its own
    await platform.shows("m-c1-r2", progress_text([RUNNING]))
    await live.close()
    assert platform.calls == [
        ("post", "m-c1-r1", progress_text([DONE, OTHER])),
        ("post", "m-c1-r2", progress_text([RUNNING])),
    ]


async def test_edits_are_spaced_and_coalesced() -> None:
    platform = Platform()
    live = LiveProgress(platform.post, platform.edit, min_interval=0.2, name="t")
    live.show(event([RUNNING]))
    await platform.shows("m-c1-r1", progress_text([RUNNING]))
    live.show(event([DONE]))
    live.show(event([DONE, OTHER]))  # within the interval: one edit shows both
    await platform.shows("m-c1-r1", progress_text([DONE, OTHER]))
    await live.close()
    assert [c[0] for c in platform.calls] == ["post", "edit"]


async def test_flood_control_is_waited_out_and_other_errors_end_quietly() -> None:
    platform = Platform()
    live = LiveProgress(platform.post, platform.edit, min_interval=0.01, name="t")
    platform.fail = [RateLimited("slow down", 0.01)]
    live.show(event([RUNNING]))
    await platform.shows("m-c1-r1", progress_text([RUNNING]))
    platform.fail = [PermanentSendError("message gone")]
    live.show(event([DONE]))
    async with asyncio.timeout(5), platform.changed:
        await platform.changed.wait_for(lambda: not platform.fail)
    live.show(event([DONE, OTHER]))  # the failed edit ended its flusher quietly; a new one runs
    await platform.shows("m-c1-r1", progress_text([DONE, OTHER]))
    await live.close()
    assert platform.calls == [
        ("post", "m-c1-r1", progress_text([RUNNING])),
        ("edit", "m-c1-r1", progress_text([DONE, OTHER])),
    ]


async def test_close_cancels_a_waiting_flusher() -> None:
    platform = Platform()
    live = LiveProgress(platform.post, platform.edit, min_interval=60, name="t")
    live.show(event([RUNNING]))
    await platform.shows("m-c1-r1", progress_text([RUNNING]))
    live.show(event([DONE]))  # would wait a minute
    await live.close()
    live.show(event([OTHER]))  # closed: ignored
    assert platform.calls == [("post", "m-c1-r1", progress_text([RUNNING]))]
