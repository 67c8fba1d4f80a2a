"""What to do with a job whose fire time has come: run it, record a misfire, advance.

Pure functions, no I/O: the engine calls `plan_due` inside the transaction that
claims the run, so the decision and the claim commit together.

A fire time is *late* when the engine reaches it more than the grace period
after it passed (the daemon was down, or too busy). Then the misfire policy
decides: `skip` records one `missed` run and moves on to the next future fire
time; `run_once` runs once (for the newest missed fire time) and moves on.
On-time fire times run; fire times that passed during that same grace window
are coalesced into the one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.jobs import JobSpec, MisfirePolicy
from scheduler.schedules import Schedule

__all__ = ["Plan", "effective_misfire_policy", "plan_due"]


@dataclass(frozen=True, slots=True)
class Plan:
    run_at: datetime | None  # the fire time to run (the run's scheduled_at)
    catch_up: bool  # run_at is a late fire time made up under run_once
    missed_at: datetime | None  # a late fire time to record as missed
    next_run_at: datetime | None  # None: nothing more (one-shot done)


def effective_misfire_policy(
    spec: JobSpec, schedule: Schedule, default: MisfirePolicy
) -> MisfirePolicy:
    if spec.misfire_policy is not None:
        return spec.misfire_policy
    return MisfirePolicy.RUN_ONCE if schedule.one_shot else default


def plan_due(
    schedule: Schedule,
    due: datetime,
    now: datetime,
    policy: MisfirePolicy,
    grace: timedelta,
) -> Plan:
    """Decide for a job whose `next_run_at` (`due`) is <= `now`."""
    late = now - due > grace
    if schedule.one_shot:
        if late and policy is MisfirePolicy.SKIP:
            return Plan(None, False, due, None)
        return Plan(due, late, None, None)
    latest = schedule.latest_at_or_before(due, now)
    following = schedule.next_after(latest)
    if not late:
        return Plan(due, False, None, following)
    if policy is MisfirePolicy.SKIP:
        return Plan(None, False, due, following)
    return Plan(latest, True, None, following)
