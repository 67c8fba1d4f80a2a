"""`picobot gateway` starts with the garbage collector off and, once ready and
warmed, freezes what start-up made and turns collection back on."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli.program import _settle_memory, main


@pytest.fixture
def collector() -> Iterator[None]:
    """Whatever a test does to the collector, this process gets it back as it was."""
    assert gc.isenabled()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


async def test_settling_waits_for_the_warm_up_then_freezes_and_collects_again(
    collector: None,
) -> None:
    gc.disable()
    warmed = asyncio.Event()
    settle = asyncio.create_task(_settle_memory(warmed))
    for _ in range(5):  # loop passes: it runs up to its wait for the warm-up, and stays there
        await asyncio.sleep(0)
    assert not settle.done()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0

    warmed.set()
    await settle
    assert gc.isenabled()
    assert gc.get_freeze_count() > 1_000  # this interpreter's modules, classes, …


def test_a_gateway_that_fails_to_start_leaves_the_collector_on(
    collector: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"gateway": {"port": "not a port"}}))
    assert main(["gateway", "--config", str(config)]) == 2
    assert "gateway.port" in capsys.readouterr().err
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


async def test_a_warm_up_that_never_ends_does_not_leave_the_collector_off(
    collector: None,
) -> None:
    gc.disable()
    await asyncio.wait_for(_settle_memory(asyncio.Event(), latest_secs=0.05), 5)
    assert gc.isenabled()
