"""Job definitions: the validated shape of a scheduled job, whoever wrote it.

The same models validate jobs from the config file, the `scheduler_manage`
tool and the database. `parse_job` turns a raw mapping into a `JobSpec` or
raises `JobValidationError`, whose message names the job and each bad field
(`job 'daily': schedule.expression: not a valid 5-field cron expression`).
Nothing here touches storage or the clock.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "SESSION_CLEANUP_EVENT",
    "AgentTaskJob",
    "AgentTaskPayload",
    "AtSchedule",
    "ChatTarget",
    "CronSchedule",
    "DelaySchedule",
    "InternalEventJob",
    "InternalEventPayload",
    "IntervalSchedule",
    "JobKind",
    "JobSpec",
    "JobValidationError",
    "MisfirePolicy",
    "OutboundMessageJob",
    "OutboundMessagePayload",
    "OverlapPolicy",
    "ScheduleSpec",
    "SilentAgentTaskJob",
    "SilentTarget",
    "parse_job",
]

SESSION_CLEANUP_EVENT = "session_cleanup"
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$"
# where a cron expression is tried once; whether its dates exist depends on no zone
_CRON_PROBE_FROM = datetime(2001, 1, 1)  # noqa: DTZ001


class JobValidationError(ValueError):
    """A job definition is invalid; `problems` pairs a field path with the reason."""

    def __init__(self, job_id: str, problems: list[tuple[str, str]]) -> None:
        self.job_id = job_id
        self.problems = problems
        detail = "; ".join(f"{where}: {why}" if where else why for where, why in problems)
        super().__init__(f"job {job_id!r}: {detail}")


class JobKind(StrEnum):
    INTERNAL_EVENT = "internal_event"
    OUTBOUND_MESSAGE = "outbound_message"
    AGENT_TASK = "agent_task"
    SILENT_AGENT_TASK = "silent_agent_task"


class MisfirePolicy(StrEnum):
    SKIP = "skip"  # a fire time that passed unrun is recorded as missed
    RUN_ONCE = "run_once"  # run once to catch up, however many fire times passed


class OverlapPolicy(StrEnum):
    SKIP = "skip"  # a fire time reached while the previous run is running is skipped
    ALLOW = "allow"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_zone(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Asia" is a directory
        raise ValueError(f"unknown IANA time zone {value!r}") from None
    return value


# -- schedules -------------------------------------------------------------------
# A hundred years: later times would not fit a datetime (delay 1e20 raised
# OverflowError, not a validation error, where the first fire time was computed).
_MAX_SCHEDULE_SECS = 100 * 366 * 86_400
_AT_YEARS = range(1970, 9999)  # any zone's offset keeps these inside datetime's range


class DelaySchedule(_Model):
    """Once, `seconds` after the job was created."""

    type: Literal["delay"]
    seconds: float = Field(gt=0, le=_MAX_SCHEDULE_SECS)


class IntervalSchedule(_Model):
    """Every `seconds`, the first time one interval after the job was created."""

    type: Literal["interval"]
    seconds: float = Field(gt=0, le=_MAX_SCHEDULE_SECS)


class AtSchedule(_Model):
    """Once, at an absolute time; a time without offset is read in `timezone`."""

    type: Literal["at"]
    at: datetime
    timezone: str | None = None

    check_timezone = field_validator("timezone")(_check_zone)

    @field_validator("at")
    @classmethod
    def _in_range(cls, value: datetime) -> datetime:
        if value.year not in _AT_YEARS:
            raise ValueError(f"{value.isoformat()} is out of range (years 1970 to 9998)")
        return value


class CronSchedule(_Model):
    """A 5-field cron expression evaluated in `timezone` (default: `time.timezone`)."""

    type: Literal["cron"]
    expression: str
    timezone: str | None = None

    check_timezone = field_validator("timezone")(_check_zone)

    @field_validator("expression")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        value = " ".join(value.split())
        if len(value.split(" ")) != 5 or not croniter.is_valid(value):
            raise ValueError(
                f"{value!r} is not a valid 5-field cron expression "
                "(minute hour day-of-month month day-of-week)"
            )
        try:  # a date no month has ("0 9 30 2 *"): no first fire time, at start or at `put`
            croniter(value, _CRON_PROBE_FROM).get_next(datetime)
        except CroniterBadDateError:
            raise ValueError(f"{value!r} never fires: none of its months has that day") from None
        return value


ScheduleSpec: TypeAlias = Annotated[
    DelaySchedule | IntervalSchedule | AtSchedule | CronSchedule, Field(discriminator="type")
]
_SCHEDULE_TAGS = {"delay", "interval", "at", "cron"}


# -- targets and payloads ----------------------------------------------------------
class ChatTarget(_Model):
    channel: str = Field(min_length=1)
    chat_id: str = Field(min_length=1)


class SilentTarget(ChatTarget):
    """`chat_id` receives failure notices; the work happens in `session_chat_id`."""

    session_chat_id: str | None = Field(None, min_length=1)


class InternalEventPayload(BaseModel):
    """`event` names the handler; every other key is handed to it."""

    model_config = ConfigDict(extra="allow", frozen=True)
    event: str = Field(min_length=1)

    @model_validator(mode="after")
    def _known_event_arguments(self) -> InternalEventPayload:
        if self.event == SESSION_CLEANUP_EVENT:
            extra = self.model_extra or {}
            idle = extra.get("max_idle_secs")
            if idle is not None and (
                isinstance(idle, bool) or not isinstance(idle, int | float) or idle <= 0
            ):
                raise ValueError("max_idle_secs must be a positive number of seconds")
        return self

    def arguments(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class OutboundMessagePayload(_Model):
    text: str = Field(min_length=1)


class AgentTaskPayload(_Model):
    prompt: str = Field(min_length=1)
    agent: str | None = None  # None: the channel's agent
    fresh_session: bool = False
    system_prompt: str | None = None
    sender_id: str = Field("scheduler", min_length=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = Field(None, gt=0)  # this job's per-run cap (scheduler.max_run_tokens)


# -- jobs ----------------------------------------------------------------------------
class _JobBase(_Model):
    id: str = Field(pattern=JOB_ID_PATTERN)
    schedule: ScheduleSpec
    enabled: bool = True
    description: str | None = None
    misfire_policy: MisfirePolicy | None = None  # None: run_once for one-shots, else the default
    overlap_policy: OverlapPolicy = OverlapPolicy.SKIP
    timeout_secs: float | None = Field(None, gt=0)  # None: scheduler.run_timeout_secs

    def definition(self) -> dict[str, Any]:
        """The JSON form stored in the database (parses back to an equal spec)."""
        return self.model_dump(mode="json")

    def schedule_key(self) -> str:
        """Changes exactly when the schedule does (a changed schedule restarts the timing)."""
        return self.schedule.model_dump_json()


class InternalEventJob(_JobBase):
    kind: Literal["internal_event"]
    payload: InternalEventPayload


class OutboundMessageJob(_JobBase):
    kind: Literal["outbound_message"]
    target: ChatTarget
    payload: OutboundMessagePayload


class AgentTaskJob(_JobBase):
    kind: Literal["agent_task"]
    target: ChatTarget
    payload: AgentTaskPayload


class SilentAgentTaskJob(_JobBase):
    kind: Literal["silent_agent_task"]
    target: SilentTarget
    payload: AgentTaskPayload

    @property
    def session_chat_id(self) -> str:
        return self.target.session_chat_id or f"scheduler/{self.id}"


JobSpec: TypeAlias = Annotated[
    InternalEventJob | OutboundMessageJob | AgentTaskJob | SilentAgentTaskJob,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[JobSpec] = TypeAdapter(JobSpec)
_KIND_TAGS = {k.value for k in JobKind}


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts = list(loc)
    if parts and parts[0] in _KIND_TAGS:
        parts.pop(0)  # the discriminator tag pydantic puts in front
    if len(parts) >= 2 and parts[0] == "schedule" and parts[1] in _SCHEDULE_TAGS:
        parts.pop(1)
    return ".".join(str(p) for p in parts)


def _reason(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    if kind == "union_tag_not_found":
        tag = err["ctx"]["discriminator"].strip("'")
        allowed = sorted(_KIND_TAGS if tag == "kind" else _SCHEDULE_TAGS)
        return f"required (one of {', '.join(allowed)})"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def parse_job(raw: Any) -> JobSpec:
    """Validate one job definition; the error names the job and each bad field."""
    if not isinstance(raw, dict):
        raise JobValidationError("?", [("", "a job must be a JSON object")])
    job_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else "?"
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = _field_path(err["loc"])
            if err["type"] == "union_tag_not_found" and not where:
                where = str(err["ctx"]["discriminator"]).strip("'")
            problems.append((where, _reason(err)))
        raise JobValidationError(str(job_id), problems) from None
