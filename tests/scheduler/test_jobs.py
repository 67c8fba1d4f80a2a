"""Job validation: the spec's config example parses; every error names the job and the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.config.core import ConfigError
from gateway.config.loading import parse_config
from scheduler.config import SchedulerConfig
from scheduler.jobs import (
    AgentTaskJob,
    InternalEventJob,
    JobValidationError,
    SilentAgentTaskJob,
    parse_job,
)

# The example from the spec (picobot-readme §10.3), verbatim in structure.
SPEC_EXAMPLE = {
    "enabled": True,
    "tick_resolution_ms": 1000,
    "misfire_policy": "skip",
    "jobs": [
        {
            "id": "session.cleanup",
            "kind": "internal_event",
            "schedule": {"type": "interval", "seconds": 300},
            "payload": {"event": "session_cleanup"},
        },
        {
            "id": "agent.daily_summary",
            "kind": "agent_task",
            "schedule": {"type": "cron", "expression": "30 18 * * *"},
            "target": {"channel": "feishu", "chat_id": "oc_xxx"},
            "payload": {
                "prompt": "请总结今天的项目进展，并列出明天的优先事项",
                "agent": "default",
                "fresh_session": True,
                "system_prompt": "你是日报助手，输出时先给摘要，再给待办。",
                "sender_id": "scheduler-daily-summary",
                "metadata": {"job_type": "daily_summary", "source": "scheduler"},
            },
        },
        {
            "id": "agent.weekly_report.background",
            "kind": "silent_agent_task",
            "schedule": {"type": "cron", "expression": "0 8 * * 1"},
            "target": {
                "channel": "feishu",
                "chat_id": "oc_xxx",
                "session_chat_id": "scheduler/agent.weekly_report.background",
            },
            "payload": {
                "prompt": "请后台整理上周项目进展",
                "agent": "default",
                "fresh_session": False,
                "system_prompt": "你是周报助手",
                "sender_id": "scheduler-weekly-report",
                "metadata": {"job_type": "weekly_report_background"},
            },
        },
    ],
}


def test_the_spec_example_parses_into_typed_jobs() -> None:
    config = SchedulerConfig.model_validate(SPEC_EXAMPLE)
    cleanup, daily, weekly = config.jobs
    assert isinstance(cleanup, InternalEventJob)
    assert cleanup.payload.event == "session_cleanup"
    assert isinstance(daily, AgentTaskJob)
    assert daily.payload.fresh_session is True
    assert daily.payload.metadata == {"job_type": "daily_summary", "source": "scheduler"}
    assert isinstance(weekly, SilentAgentTaskJob)
    assert weekly.session_chat_id == "scheduler/agent.weekly_report.background"


def test_silent_task_session_defaults_to_scheduler_slash_job_id() -> None:
    job = parse_job(
        {
            "id": "bg",
            "kind": "silent_agent_task",
            "schedule": {"type": "interval", "seconds": 60},
            "target": {"channel": "telegram", "chat_id": "7"},
            "payload": {"prompt": "p"},
        }
    )
    assert isinstance(job, SilentAgentTaskJob)
    assert job.session_chat_id == "scheduler/bg"


def test_a_stored_definition_parses_back_to_the_same_job() -> None:
    for raw in SPEC_EXAMPLE["jobs"]:  # type: ignore[attr-defined]
        job = parse_job(raw)
        assert parse_job(job.definition()) == job


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"id": "j1", "kind": "agent_task", "schedule": {"type": "cron", "expression": "61 * * * *"},
             "target": {"channel": "c", "chat_id": "1"}, "payload": {"prompt": "p"}},
            "job 'j1': schedule.expression: '61 * * * *' is not a valid 5-field cron expression",
        ),
        (  # no month it names has a 31st: it stopped the gateway from starting
            {"id": "j1b", "kind": "agent_task", "schedule": {"type": "cron", "expression": "0 9 31 4,6 *"},
             "target": {"channel": "c", "chat_id": "1"}, "payload": {"prompt": "p"}},
            "job 'j1b': schedule.expression: '0 9 31 4,6 *' never fires: none of its months has that day",
        ),
        (
            {"id": "j2", "kind": "agent_task", "schedule": {"type": "interval", "seconds": 0},
             "target": {"channel": "c", "chat_id": "1"}, "payload": {"prompt": "p"}},
            "job 'j2': schedule.seconds: Input should be greater than 0",
        ),
        (  # times past datetime's range raised OverflowError where the first fire time was computed
            {"id": "j2b", "kind": "agent_task", "schedule": {"type": "delay", "seconds": 1e20},
             "target": {"channel": "c", "chat_id": "1"}, "payload": {"prompt": "p"}},
            "job 'j2b': schedule.seconds: Input should be less than or equal to 3162240000",
        ),
        (
            {"id": "j2c", "kind": "agent_task", "schedule": {"type": "at", "at": "9999-12-31T23:00:00-05:00"},
             "target": {"channel": "c", "chat_id": "1"}, "payload": {"prompt": "p"}},
            "job 'j2c': schedule.at: 9999-12-31T23:00:00-05:00 is out of range (years 1970 to 9998)",
        ),
        (
            {"id": "j3", "kind": "agent_task", "schedule": {"type": "delay", "seconds": 5},
             "target": {"channel": "c"}, "payload": {"prompt": "p"}},
            "job 'j3': target.chat_id: required",
        ),
        (
            {"id": "j4", "kind": "outbound_message", "schedule": {"type": "delay", "seconds": 5},
             "target": {"channel": "c", "chat_id": "1"}, "payload": {"txt": "hi"}},
            "job 'j4': payload.text: required; payload.txt: unknown field",
        ),
        (
            {"id": "j5", "kind": "agent_task", "schedule": {"type": "cron", "expression": "0 9 * * *",
             "timezone": "Mars/Olympus"}, "target": {"channel": "c", "chat_id": "1"},
             "payload": {"prompt": "p"}},
            "job 'j5': schedule.timezone: unknown IANA time zone 'Mars/Olympus'",
        ),
        (  # a directory of the zone database: ZoneInfo raised OSError, not a validation error
            {"id": "j5b", "kind": "agent_task", "schedule": {"type": "cron", "expression": "0 9 * * *",
             "timezone": "Europe"}, "target": {"channel": "c", "chat_id": "1"},
             "payload": {"prompt": "p"}},
            "job 'j5b': schedule.timezone: unknown IANA time zone 'Europe'",
        ),
        (
            {"id": "j6", "schedule": {"type": "delay", "seconds": 5}},
            "job 'j6': kind: required (one of agent_task, internal_event, outbound_message",
        ),
        (
            {"id": "j7", "kind": "internal_event", "schedule": {"type": "delay", "seconds": 5},
             "payload": {"event": "session_cleanup", "max_idle_secs": -3}},
            "job 'j7': payload: max_idle_secs must be a positive number of seconds",
        ),
        (
            {"id": "bad id!", "kind": "internal_event", "schedule": {"type": "delay", "seconds": 5},
             "payload": {"event": "x"}},
            "job 'bad id!': id: String should match pattern",
        ),
    ],
)  # fmt: skip
def test_errors_name_the_job_and_the_field(raw: dict[str, object], expected: str) -> None:
    with pytest.raises(JobValidationError) as caught:
        parse_job(raw)
    assert str(caught.value).startswith(expected), str(caught.value)


def test_scheduler_config_rejects_duplicate_ids_and_names_the_bad_job() -> None:
    job = SPEC_EXAMPLE["jobs"][0]  # type: ignore[index]
    with pytest.raises(ValidationError) as caught:
        SchedulerConfig.model_validate({"jobs": [job, job]})
    assert "jobs[1]: job 'session.cleanup': id: duplicate job id" in str(caught.value)


def test_a_bad_job_fails_config_loading_with_its_path_id_and_field() -> None:
    raw = {
        "scheduler": {
            "jobs": [
                {
                    "id": "daily",
                    "kind": "agent_task",
                    "schedule": {"type": "cron", "expression": "30 18 * *"},
                    "target": {"channel": "feishu", "chat_id": "oc_1"},
                    "payload": {"prompt": "p"},
                }
            ]
        }
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, {})
    message = str(caught.value)
    assert "scheduler.jobs" in message
    assert "job 'daily': schedule.expression" in message
