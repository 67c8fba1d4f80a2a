"""Configuration of the scheduler (the `scheduler` section).

Each entry of `jobs` is validated by `scheduler.jobs.parse_job`, so a bad job
fails start-up with the job's id and the offending field. Job ids must be unique.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scheduler.jobs import JobSpec, JobValidationError, MisfirePolicy, parse_job

__all__ = ["SchedulerConfig"]


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True  # as in the spec's example: memory maintenance runs out of the box
    # Fire times are rounded up to this grid: jobs due within one tick wake the engine once.
    tick_resolution_ms: int = Field(1000, ge=1)
    # Claimed runs waiting for a worker; the engine stops claiming while it is full.
    worker_queue_capacity: int = Field(128, ge=1)
    # Runs executing at the same time (different jobs, or one job with overlap_policy allow).
    max_concurrent_runs: int = Field(4, ge=1)
    # Default for recurring jobs; one-shot jobs default to run_once.
    misfire_policy: MisfirePolicy = MisfirePolicy.SKIP
    # A fire time later than this when the engine gets to it counts as a misfire.
    misfire_grace_secs: float = Field(60.0, ge=0)
    # Upper bound of one run unless the job sets timeout_secs.
    run_timeout_secs: float = Field(600.0, gt=0)
    # Tokens one agent-task run may use (input + output of its model calls) unless the
    # job's payload sets max_tokens; an unattended job must not burn the day's budget.
    # null: the agent's max_turn_tokens only.
    max_run_tokens: int | None = Field(200_000, gt=0)
    # Newest runs kept per job in job_runs.
    history_per_job: int = Field(200, ge=1)
    # Longest sleep between looks at the database, so that `picobot jobs run|resume`
    # from another process is noticed; 0 sleeps until the next fire time only.
    rescan_interval_secs: float = Field(60.0, ge=0)
    # Add builtin.memory_maintenance_daily when a memory_maintenance handler exists.
    builtin_jobs: bool = True
    jobs: list[JobSpec] = Field(default_factory=list)

    @field_validator("jobs", mode="before")
    @classmethod
    def _parse_jobs(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value  # pydantic reports the type error
        problems: list[str] = []
        parsed: list[JobSpec] = []
        seen: set[str] = set()
        for index, raw in enumerate(value):
            try:
                job = parse_job(raw)
            except JobValidationError as exc:
                problems.append(f"jobs[{index}]: {exc}")
                continue
            if job.id in seen:
                problems.append(f"jobs[{index}]: job {job.id!r}: id: duplicate job id")
            seen.add(job.id)
            parsed.append(job)
        if problems:
            raise ValueError("; ".join(problems))
        return parsed
