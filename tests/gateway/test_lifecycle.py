"""Services start in order, stop in reverse, and a failed start stops what started."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest

from gateway.lifecycle import Readiness, Stage, StartupError, start_services


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
