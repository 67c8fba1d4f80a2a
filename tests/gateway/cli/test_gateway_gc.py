"""`picobot gateway` starts with the garbage collector off and, once started,
freezes what start-up made and turns collection back on; once a provider's
SDK is imported (at its first call) it freezes again."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

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


class _Watched(asyncio.Event):
    """An event that also tells when someone starts waiting for it."""

    def __init__(self) -> None:
        super().__init__()
        self.awaited = asyncio.Event()

    async def wait(self) -> Literal[True]:
        self.awaited.set()
        return await super().wait()


async def test_settling_freezes_once_started_and_again_once_an_sdk_is_loaded(
    collector: None,
) -> None:
    gc.disable()
    started, loaded = _Watched(), _Watched()
    settle = asyncio.create_task(_settle_memory(started, loaded))
    await started.awaited.wait()  # it waits for the start, having touched nothing
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0

    started.set()
    await loaded.awaited.wait()  # then for an SDK, with collection back on
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    assert frozen > 1_000  # this interpreter's modules, classes, …

    sdk = [[n] for n in range(5_000)]  # what an SDK's import leaves behind
    loaded.set()
    await settle
    assert gc.get_freeze_count() >= frozen + len(sdk)


def test_a_gateway_that_fails_to_start_leaves_the_collector_on(
    collector: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"gateway": {"port": "not a port"}}))
    assert main(["gateway", "--config", str(config)]) == 2
    assert "gateway.port" in capsys.readouterr().err
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
