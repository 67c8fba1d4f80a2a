"""The memory tools over the real service and database: limits, errors the
model reads, and the scope taken from the turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.memory.summary_block import BEGIN, END, render_block, replace_block, strip_block
from agent.messages import ToolCall
from agent.tools.base import ToolContext, ToolRegistry, ToolServices, ToolSettings
from agent.tools.memory import MemoryManageTool, MemorySearchTool
from gateway.memory.service import MemoryGateway
from storage.sql.memory.memories import Scope
from storage.sqlite.db import Database
from storage.units.memories import MemoryStore


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MemoryGateway]:
    async with Database(tmp_path / "m.db") as db:
        yield MemoryGateway(MemoryStore(db), cap=3)


def ctx(service: MemoryGateway, sender: str = "u1", tmp: Path = Path("/tmp")) -> ToolContext:
    return ToolContext(
        "feishu:c1", "feishu", "c1", sender, ToolSettings(tmp), message_id="m9",
        message_seq=4, services=ToolServices(memory=service),
    )  # fmt: skip


async def call(service: MemoryGateway, name: str, sender: str = "u1", **args: object) -> str:
    registry = ToolRegistry([MemorySearchTool(), MemoryManageTool()])
    result = await registry.execute(ToolCall("c", name, json.dumps(args)), ctx(service, sender))
    return result.content


async def test_put_update_delete_and_errors_the_model_reads(service: MemoryGateway) -> None:
    put = {"action": "put", "namespace": "prefs", "memory_key": "lang"}
    assert await call(service, "memory_manage", **put, content="zh") == "created prefs/lang"
    assert await call(service, "memory_manage", **put, content="en") == "updated prefs/lang"
    upd = {"action": "update", "namespace": "prefs", "memory_key": "nope", "content": "x"}
    assert "no memory prefs/nope to update" in await call(service, "memory_manage", **upd)
    bad = await call(service, "memory_manage", **{**put, "namespace": "Bad NS"}, content="x")
    assert bad.startswith("Error: invalid arguments: namespace")
    long = await call(service, "memory_manage", **put, content="x" * 4001)
    assert long.startswith("Error: invalid arguments: content")
    got = json.loads(await call(service, "memory_search", action="get", namespace="prefs",
                                memory_key="lang"))  # fmt: skip
    assert got["content"] == "en"
    other = await call(service, "memory_search", "u2", action="list")
    assert json.loads(other) == {"results": []}  # another sender sees nothing
    delete = {"action": "delete", "namespace": "prefs", "memory_key": "lang"}
    assert await call(service, "memory_manage", **delete) == "deleted prefs/lang"
    assert "no memory prefs/lang to delete" in await call(service, "memory_manage", **delete)


async def test_a_write_over_the_cap_is_refused_not_dropped(service: MemoryGateway) -> None:
    for i in range(3):
        put = {"action": "put", "namespace": "n", "memory_key": f"k{i}", "content": "c"}
        assert (await call(service, "memory_manage", **put)).startswith("created")
    over = {"action": "put", "namespace": "n", "memory_key": "k3", "content": "c"}
    assert "memory is full (3 entries" in await call(service, "memory_manage", **over)
    again = {"action": "put", "namespace": "n", "memory_key": "k0", "content": "new"}
    assert await call(service, "memory_manage", **again) == "updated n/k0"  # updates still fit
    listed = json.loads(await call(service, "memory_search", action="list"))["results"]
    assert len(listed) == 3


async def test_search_limit_is_bounded(service: MemoryGateway) -> None:
    too_many = await call(service, "memory_search", action="search", query="x", limit=51)
    assert too_many.startswith("Error: invalid arguments: limit")
    assert "needs a query" in await call(service, "memory_search", action="search")


async def test_the_origin_is_recorded(service: MemoryGateway) -> None:
    put = {"action": "put", "namespace": "n", "memory_key": "k", "content": "c"}
    await call(service, "memory_manage", **put)
    row = await service.store.get(Scope("user", "feishu:u1"), "n", "k")
    assert row is not None
    assert (row.source.session_id, row.source.message_id, row.source.message_seq) == (
        "feishu:c1", "m9", 4
    )  # fmt: skip


def test_the_block_is_replaced_in_place_and_stripped_for_the_model() -> None:
    text = f"head\n{BEGIN}\nold\n{END}\ntail\n"
    new = replace_block(text, render_block([("feishu:u1", "- likes tea")]))
    assert new.startswith("head\n")
    assert new.endswith("\ntail\n")
    assert "likes tea" in new
    assert "old" not in new
    assert strip_block(new) == "head\ntail\n"
    assert replace_block("no block", render_block([])).startswith("no block\n\n" + BEGIN)
