"""RunSlots: turns and sub-agents share the run cap; a turn's first child
borrows its parent's slot, so no cap deadlocks a `task` (gateway/turns/run_slots.py)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.turns.run_slots import NoRunSlot, RunSlots

NO_WAIT = 0.01  # how long a child may wait where it must not get a slot


async def test_a_turns_first_child_borrows_its_slot_even_at_a_cap_of_one() -> None:
    slots = RunSlots(limit=1, child_limit=4)
    async with slots.turn():
        assert slots.free == 0
        async with slots.child(NO_WAIT):
            assert (slots.free, slots.children) == (0, 1)
        async with slots.child(NO_WAIT):  # handed back: the next child borrows it again
            pass
    assert (slots.free, slots.children) == (1, 0)


async def test_further_children_take_free_slots_and_count_against_the_cap() -> None:
    slots = RunSlots(limit=2, child_limit=4)
    other_turn = asyncio.Event()

    async def another_turn() -> None:
        async with slots.turn():
            other_turn.set()

    async with slots.turn(), slots.child(NO_WAIT):
        assert slots.free == 1  # borrowed: the cap's other slot is still free
        async with slots.child(NO_WAIT):
            assert slots.free == 0
            waiting = asyncio.create_task(another_turn(), name="another-turn")
            for _ in range(5):
                await asyncio.sleep(0)  # nothing can let it in while the child runs
            assert not other_turn.is_set()
            with pytest.raises(NoRunSlot):  # a third child: neither slot is to be had
                async with slots.child(NO_WAIT):
                    pass
        await other_turn.wait()  # the second child's slot went to the waiting turn
        await waiting
    assert (slots.free, slots.children) == (2, 0)


async def test_a_waiting_child_gets_the_slot_a_sibling_hands_back() -> None:
    slots = RunSlots(limit=1, child_limit=4)
    first_done = asyncio.Event()
    order: list[str] = []

    async def child(name: str, hold: asyncio.Event | None) -> None:
        async with slots.child(60):
            order.append(name)
            if hold is not None:
                await hold.wait()

    async with slots.turn(), asyncio.TaskGroup() as tg:
        tg.create_task(child("first", first_done), name="first")
        tg.create_task(child("second", None), name="second")
        for _ in range(5):
            await asyncio.sleep(0)
        assert order == ["first"]
        first_done.set()
    assert order == ["first", "second"]


async def test_children_across_the_gateway_are_capped_by_child_limit() -> None:
    slots = RunSlots(limit=8, child_limit=1)
    async with slots.turn(), slots.child(NO_WAIT):

        async def child_of_another_turn() -> None:
            async with slots.turn(), slots.child(NO_WAIT):
                pass

        other = asyncio.create_task(child_of_another_turn(), name="other")
        with pytest.raises(NoRunSlot):
            await other
    assert (slots.free, slots.children) == (8, 0)


async def test_a_cancelled_wait_takes_nothing() -> None:
    slots = RunSlots(limit=1, child_limit=4)
    async with slots.turn(), slots.child(NO_WAIT):
        waiting = asyncio.create_task(slots.child(60).__aenter__(), name="waiting")
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (slots.free, slots.children) == (0, 1)
    assert (slots.free, slots.children) == (1, 0)


async def test_a_child_outside_any_turn_takes_a_free_slot() -> None:
    slots = RunSlots(limit=1, child_limit=4)
    async with slots.child(NO_WAIT):
        assert slots.free == 0
        with pytest.raises(NoRunSlot):
            async with slots.child(NO_WAIT):
                pass


async def test_a_freed_slot_goes_to_the_run_waiting_not_back_to_the_busy_chat() -> None:
    """A chat whose worker asks again at once (a full queue) must not take its
    slot back ahead of another chat that waits for one."""
    slots = RunSlots(limit=1, child_limit=4)
    order: list[str] = []
    second_queued = asyncio.Event()

    async def busy_chat() -> None:
        for n in range(5):
            async with slots.turn():
                order.append(f"A{n}")
                if n == 0:
                    await second_queued.wait()

    async def other_chat() -> None:
        second_queued.set()
        async with slots.turn():
            order.append("B")

    async with asyncio.TaskGroup() as tg:
        tg.create_task(busy_chat(), name="busy")
        await asyncio.sleep(0)
        tg.create_task(other_chat(), name="other")
    assert order[:2] == ["A0", "B"]


async def test_a_slot_handed_to_a_waiter_cancelled_meanwhile_goes_on_to_the_next() -> None:
    slots = RunSlots(limit=1, child_limit=4)
    got: list[str] = []

    async def turn(name: str) -> None:
        async with slots.turn():
            got.append(name)

    async with slots.turn():
        first = asyncio.create_task(turn("first"), name="first")
        second = asyncio.create_task(turn("second"), name="second")
        await asyncio.sleep(0)  # both wait
    first.cancel()  # the slot was just handed to it; it never ran
    with pytest.raises(asyncio.CancelledError):
        await first
    await second
    assert got == ["second"]
    assert slots.free == 1


async def test_a_slot_freed_while_a_waiter_is_being_cancelled_is_not_lost() -> None:
    """A waiter cancelled (a /stop, a child's timeout) but not yet run is still
    queued when the holder lets go in the same loop pass: the slot must not be
    handed to it, and the cap must stay whole."""
    slots = RunSlots(limit=1, child_limit=4)
    holding = slots.turn()
    await holding.__aenter__()

    async def wait_for_a_turn() -> None:
        async with slots.turn():
            raise AssertionError("a cancelled waiter ran")

    waiter = asyncio.create_task(wait_for_a_turn(), name="waiter")
    await asyncio.sleep(0)  # it is queued
    waiter.cancel()  # its wait is cancelled; the task itself has not run since
    await holding.__aexit__(None, None, None)  # the release must not fail
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.free == 1
    async with asyncio.timeout(1), slots.turn():
        assert slots.free == 0
