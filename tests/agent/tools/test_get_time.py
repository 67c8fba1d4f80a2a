"""get_time reports the current time in the default or a requested IANA zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.messages import ToolCall
from agent.tools.base import ToolContext, ToolError, ToolRegistry
from agent.tools.get_time import GetTimeArgs, GetTimeTool

FIXED = datetime(2026, 1, 15, 23, 30, 5, tzinfo=UTC)  # a Thursday in UTC


def fixed_clock() -> datetime:
    return FIXED


async def test_default_zone_from_constructor(ctx: ToolContext) -> None:
    tool = GetTimeTool("Asia/Shanghai", clock=fixed_clock)
    out = await tool.run(GetTimeArgs(), ctx)
    assert out.splitlines() == [
        "time: 2026-01-16T07:30:05+08:00",
        "weekday: Friday",
        "timezone: Asia/Shanghai (CST)",
        "utc_offset: +08:00",
    ]


async def test_requested_zone_with_negative_and_half_hour_offsets(ctx: ToolContext) -> None:
    tool = GetTimeTool("UTC", clock=fixed_clock)
    ny = await tool.run(GetTimeArgs(timezone="America/New_York"), ctx)
    kolkata = await tool.run(GetTimeArgs(timezone="Asia/Kolkata"), ctx)
    assert "time: 2026-01-15T18:30:05-05:00" in ny
    assert "weekday: Thursday" in ny
    assert "utc_offset: -05:00" in ny
    assert "utc_offset: +05:30" in kolkata


async def test_real_clock_is_close_to_now(ctx: ToolContext) -> None:
    out = await GetTimeTool("UTC").run(GetTimeArgs(), ctx)
    stamp = datetime.fromisoformat(out.splitlines()[0].removeprefix("time: "))
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60


async def test_empty_zone_means_the_default(ctx: ToolContext) -> None:
    tool = GetTimeTool("Europe/Berlin", clock=fixed_clock)
    assert "timezone: Europe/Berlin (CET)" in await tool.run(GetTimeArgs(timezone=""), ctx)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../etc/passwd", "America", "x" * 300])
async def test_unknown_zone_is_a_tool_error(ctx: ToolContext, zone: str) -> None:
    tool = GetTimeTool("UTC", clock=fixed_clock)
    with pytest.raises(ToolError, match="unknown timezone"):
        await tool.run(GetTimeArgs(timezone=zone), ctx)


def test_unknown_default_zone_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="unknown timezone 'Nowhere/Land'"):
        GetTimeTool("Nowhere/Land")


async def test_through_the_registry(ctx: ToolContext) -> None:
    registry = ToolRegistry([GetTimeTool("UTC", clock=fixed_clock)])
    ok = await registry.execute(ToolCall("1", "get_time", "{}"), ctx)
    bad = await registry.execute(ToolCall("2", "get_time", '{"timezone": "X/Y"}'), ctx)
    assert ok.ok
    assert "time: 2026-01-15T23:30:05+00:00" in ok.content
    assert not bad.ok
    assert "unknown timezone 'X/Y'" in bad.content
