"""Built-in internal events and jobs.

- `session_cleanup`: archive sessions idle longer than `max_idle_secs` (default
  30 days). Supported, but it runs only when a config job emits it.
- `builtin.memory_maintenance_daily`: emits `memory_maintenance` every 4 hours
  (cron `0 */4 * * *`, local zone) — added only when some feature registered a
  `memory_maintenance` handler, and overridable by a config job with that id.
"""

from __future__ import annotations

from datetime import timedelta

import structlog

from scheduler.clock import Clock
from scheduler.events import EventRegistry, InternalEvent
from scheduler.jobs import SESSION_CLEANUP_EVENT, JobSpec, parse_job
from storage.database import Database
from storage.sql.conversations.cleanup import archive_idle_sessions

__all__ = [
    "DEFAULT_MAX_IDLE_SECS",
    "MEMORY_MAINTENANCE_EVENT",
    "MEMORY_MAINTENANCE_JOB_ID",
    "builtin_jobs",
    "register_builtin_events",
]

log = structlog.get_logger(__name__)

DEFAULT_MAX_IDLE_SECS = 30 * 24 * 3600
MEMORY_MAINTENANCE_EVENT = "memory_maintenance"
MEMORY_MAINTENANCE_JOB_ID = "builtin.memory_maintenance_daily"


def register_builtin_events(events: EventRegistry, db: Database, clock: Clock) -> None:
    async def session_cleanup(event: InternalEvent) -> None:
        max_idle = float(event.arguments.get("max_idle_secs", DEFAULT_MAX_IDLE_SECS))
        cutoff = clock.now() - timedelta(seconds=max_idle)
        archived = await db.write(lambda conn: archive_idle_sessions(conn, cutoff))
        log.info("sessions_archived", count=archived, job_id=event.job_id, idle_secs=max_idle)

    if SESSION_CLEANUP_EVENT not in events:
        events.register(SESSION_CLEANUP_EVENT, session_cleanup)


def builtin_jobs(events: EventRegistry) -> list[JobSpec]:
    jobs: list[JobSpec] = []
    if MEMORY_MAINTENANCE_EVENT in events:
        jobs.append(
            parse_job(
                {
                    "id": MEMORY_MAINTENANCE_JOB_ID,
                    "kind": "internal_event",
                    "description": "memory maintenance over every user scope",
                    "schedule": {"type": "cron", "expression": "0 */4 * * *"},
                    "payload": {"event": MEMORY_MAINTENANCE_EVENT},
                }
            )
        )
    return jobs
