"""The shared stream preview (channels/stream_preview.py): one message per
turn, edits at most once per interval, ending on the latest text, and only
the turn's own reply takes it over."""

from __future__ import annotations

import asyncio

from channels.base import TransientSendError
from channels.stream_preview import PreviewStreams


class Chat:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.fail = False
        self.changed = asyncio.Event()
        self.refused = asyncio.Event()

    async def post(self, chat_id: str, where: str | None, text: str) -> str:
        if self.fail:
            self.refused.set()
            raise TransientSendError("down")
        self.calls.append(("post", chat_id, text))
        self.changed.set()
        return f"m{len(self.calls)}"

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        self.calls.append((f"edit {message_id}", chat_id, text))
        self.changed.set()

    async def settled(self, text: str) -> None:
        while not self.calls or self.calls[-1][2] != text:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)


def streams(chat: Chat, interval: float = 0.0) -> PreviewStreams[str | None, str]:
    return PreviewStreams(chat.post, chat.edit, min_interval=interval, max_chars=12, name="t")


async def test_one_message_edited_to_the_latest_text_then_taken_by_its_reply() -> None:
    chat = Chat()
    preview = streams(chat)
    await preview.delta("c1", "run-1", "Hello", None)
    await chat.settled("Hello")
    await preview.delta("c1", "run-1", ", world and more", None)
    await chat.settled("Hello, world")  # cut at max_chars
    assert await preview.take("c1", None) is None  # a command's answer: not its message
    assert await preview.take("c1", "run-2") is None  # nor another turn's reply
    assert await preview.take("c1", "run-1") == "m1"
    assert await preview.take("c1", "run-1") is None  # taken once
    assert chat.calls == [("post", "c1", "Hello"), ("edit m1", "c1", "Hello, world")]
    await preview.close()


async def test_a_failed_post_is_best_effort_and_a_new_turn_starts_a_new_message() -> None:
    chat = Chat()
    chat.fail = True
    preview = streams(chat)
    await preview.delta("c1", "run-1", "lost", None)
    await asyncio.wait_for(chat.refused.wait(), 5)  # the flusher gives up quietly
    chat.fail = False
    await preview.delta("c1", "run-2", "next", None)
    await chat.settled("next")
    assert chat.calls == [("post", "c1", "next")]
    assert await preview.take("c1", "run-2") == "m1"
    await preview.close()
