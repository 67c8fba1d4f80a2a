"""read_capped: a body up to the cap is read whole; past it, reading stops at once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from channels.capped import BodyTooLarge, read_capped


class Chunks:
    """An endless-ish body in fixed chunks that counts how many were taken."""

    def __init__(self, size: int, count: int) -> None:
        self.size, self.count, self.taken = size, count, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.count):
            self.taken += 1
            yield b"x" * self.size


async def test_a_body_of_exactly_the_cap_is_read_whole() -> None:
    assert await read_capped(Chunks(10, 3), 30) == b"x" * 30


async def test_reading_stops_at_the_first_chunk_past_the_cap() -> None:
    body = Chunks(10, 1_000_000)
    with pytest.raises(BodyTooLarge) as caught:
        await read_capped(body, 25)
    assert (body.taken, caught.value.size, caught.value.cap) == (3, 30, 25)


async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    body = Chunks(10, 1)
    with pytest.raises(BodyTooLarge) as caught:
        await read_capped(body, 25, declared=26)
    assert (body.taken, caught.value.size) == (0, 26)


async def test_a_declared_length_that_lies_low_does_not_lift_the_cap() -> None:
    with pytest.raises(BodyTooLarge):
        await read_capped(Chunks(10, 100), 25, declared=1)
