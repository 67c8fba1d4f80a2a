"""The `get_time` tool: the current time in an IANA timezone.

The default zone is the operator's configured zone (`time.timezone`), handed to
the constructor; the model may ask for another. Only aware datetimes are used.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

__all__ = ["GetTimeTool"]


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Asia" is a directory
        raise ToolError(
            f"unknown timezone {name!r}; use an IANA name such as 'Asia/Shanghai' or 'UTC'"
        ) from None


def _utc_offset(moment: datetime) -> str:
    offset = moment.utcoffset()
    assert offset is not None  # moment is always aware here
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


class GetTimeArgs(ToolArgs):
    timezone: str | None = Field(
        default=None,
        description="IANA name; default: the local zone",
    )


class GetTimeTool(Tool[GetTimeArgs]):
    name: ClassVar[str] = "get_time"
    description: ClassVar[str] = (
        "Current date and time (ISO 8601), weekday, timezone and UTC offset."
    )
    Args: ClassVar[type[ToolArgs]] = GetTimeArgs

    def __init__(
        self, default_timezone: str, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        try:  # fail at construction, not at the model's first call
            _zone(default_timezone)
        except ToolError as exc:
            raise ValueError(str(exc)) from None
        self.default_timezone = default_timezone
        self._clock = clock or (lambda: datetime.now(UTC))

    async def run(self, args: GetTimeArgs, ctx: ToolContext) -> str:
        name = args.timezone or self.default_timezone
        now = self._clock().astimezone(_zone(name))
        return (
            f"time: {now.isoformat(timespec='seconds')}\n"
            f"weekday: {now.strftime('%A')}\n"
            f"timezone: {name} ({now.tzname()})\n"
            f"utc_offset: {_utc_offset(now)}"
        )
