"""Configuration of the scheduler (`scheduler`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class SchedulerConfig(BaseModel):
    """Placeholder until the scheduler lands: accepted keys, no jobs run yet."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = False
    tick_resolution_ms: int = Field(1000, ge=1)
    worker_queue_capacity: int = Field(128, ge=1)
    misfire_policy: Literal["skip", "run_once"] = "skip"
    jobs: list[dict[str, Any]] = Field(default_factory=list)
