"""Services start in order, stop in reverse, a failed start stops what
started, and the whole stop keeps to the shutdown budget."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest

from gateway.lifecycle import (
    Readiness,
    ShutdownBudget,
    Stage,
    StartupError,
    root_task_group,
    start_services,
)


def _stage(name: str, log: list[str], *, fail: bool = False) -> Stage:
    async def start(tg: asyncio.TaskGroup) -> None:
        log.append(f"start {name}")
        if fail:
            raise OSError("port in use")

    async def stop() -> None:
        log.append(f"stop {name}")

    return Stage(name, start, stop)


async def test_services_stop_in_reverse_order() -> None:
    log: list[str] = []
    async with AsyncExitStack() as stack, asyncio.TaskGroup() as tg:
        await start_services(stack, tg, [_stage("a", log), _stage("b", log)])
        log.append("running")
    assert log == ["start a", "start b", "running", "stop b", "stop a"]


async def test_a_failed_start_stops_it_and_everything_before_it() -> None:
    log: list[str] = []
    services = [_stage("a", log), _stage("b", log, fail=True), _stage("c", log)]
    tg = asyncio.TaskGroup()  # only handed over: no task is started in it

    async def run() -> None:
        async with AsyncExitStack() as stack:
            try:
                await start_services(stack, tg, services)
            finally:
                log.append("unwinding")

    with pytest.raises(StartupError, match=r"^b failed to start: OSError: port in use$"):
        await run()
    assert log == ["start a", "start b", "stop b", "unwinding", "stop a"]


def test_readiness_names_each_part_that_is_not_ready() -> None:
    readiness = Readiness()
    state = {"channel": "connecting"}
    readiness.add("channel x", lambda: state["channel"])
    readiness.add("storage", lambda: None)
    assert readiness.reasons() == ["channel x: connecting"]
    state["channel"] = None  # type: ignore[assignment]
    assert readiness.reasons() == []


def test_the_budget_keeps_a_closing_reserve_from_the_parts_that_wait_for_work() -> None:
    assert ShutdownBudget(30.0).reserve_secs == 5.0  # at most 5 s
    assert ShutdownBudget(3.0).reserve_secs == 1.0  # a third of a short budget
    budget = ShutdownBudget(30.0)
    assert (budget.left(), budget.left_to_close()) == (25.0, 30.0)  # before begin: all of it
    budget.begin()
    assert 29.0 < budget.left_to_close() <= 30.0
    assert budget.left() == pytest.approx(budget.left_to_close() - 5.0, abs=0.5)


def test_past_its_end_the_budget_gives_each_part_its_floor() -> None:
    budget = ShutdownBudget(0.5, reserve_secs=0.5)
    budget.begin()
    assert budget.left() == 0.1
    assert budget.left(at_least=1.0) == 1.0
    with pytest.raises(ValueError, match="reserve_secs"):
        ShutdownBudget(1.0, reserve_secs=2.0)


async def test_a_stop_that_hangs_is_cut_at_the_budgets_end_and_the_rest_still_stop() -> None:
    log: list[str] = []
    never = asyncio.Event()

    async def hang() -> None:
        log.append("stop hanging")
        await never.wait()

    async def nothing(tg: asyncio.TaskGroup) -> None:
        return None

    budget = ShutdownBudget(0.3, reserve_secs=0.1)
    services = [_stage("a", log), Stage("hanging", nothing, hang), _stage("c", log)]
    async with asyncio.timeout(10):  # without the cut: never
        async with AsyncExitStack() as stack, asyncio.TaskGroup() as tg:
            await start_services(stack, tg, services, budget)
            budget.begin()
    assert log == ["start a", "start c", "stop c", "stop hanging", "stop a"]


async def test_the_root_task_group_cancels_a_task_its_part_left_running() -> None:
    never = asyncio.Event()
    left: list[asyncio.Task[bool]] = []

    async def start(tg: asyncio.TaskGroup) -> None:
        left.append(tg.create_task(never.wait(), name="left running"))

    async with asyncio.timeout(10):  # a plain TaskGroup waits for it forever
        async with AsyncExitStack() as stack:
            tg = await stack.enter_async_context(root_task_group())
            await start_services(stack, tg, [Stage("careless", start)])
    assert left[0].cancelled()


async def test_the_root_task_group_still_raises_a_failed_start() -> None:
    log: list[str] = []

    async def run() -> None:
        async with AsyncExitStack() as stack:
            tg = await stack.enter_async_context(root_task_group())
            await start_services(stack, tg, [_stage("a", log, fail=True)])

    with pytest.raises(ExceptionGroup) as raised:
        await run()
    assert [type(e) for e in raised.value.exceptions] == [StartupError]
