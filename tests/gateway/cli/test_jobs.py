"""`picobot jobs …` on a real database file: list, show, run, pause, resume, delete."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gateway.cli.jobs import add_jobs_parser, run_jobs_command
from gateway.config.core import Config
from gateway.config.loading import LoadedConfig
from scheduler.admin import JobAdmin
from scheduler.clock import SystemClock
from scheduler.jobs import parse_job
from scheduler.owners import OPERATOR, JobCaller
from storage.sql import jobs as store
from storage.sql.jobs import JobSource
from storage.sqlite.db import Database


@pytest.fixture
async def loaded(tmp_path: Path) -> LoadedConfig:
    db_path = tmp_path / "storage" / "sessions.db"
    config = Config.model_validate(
        {"storage": {"path": str(db_path)}, "time": {"timezone": "Asia/Shanghai"}}
    )
    async with Database(db_path) as db:
        admin = JobAdmin(db, clock=SystemClock(), default_zone=config.time.zone)
        await admin.put(
            parse_job(
                {
                    "id": "reminder",
                    "kind": "outbound_message",
                    "schedule": {"type": "interval", "seconds": 3600},
                    "target": {"channel": "telegram", "chat_id": "7"},
                    "payload": {"text": "drink water"},
                }
            ),
            caller=JobCaller.sender("telegram", "7", admin=False),
        )
        await admin.put(
            parse_job(
                {
                    "id": "session.cleanup",
                    "kind": "internal_event",
                    "schedule": {"type": "cron", "expression": "0 3 * * *"},
                    "payload": {"event": "session_cleanup"},
                }
            ),
            JobSource.CONFIG,
            caller=OPERATOR,
        )
    return LoadedConfig(config, None, tmp_path, {})


async def jobs(loaded: LoadedConfig, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="picobot")
    add_jobs_parser(parser.add_subparsers(dest="command"))
    return await run_jobs_command(parser.parse_args(["jobs", *argv]), loaded)


async def test_list_shows_every_job_with_state_and_schedule(
    loaded: LoadedConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs(loaded, "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "ID",
        "KIND",
        "SOURCE",
        "OWNER",
        "STATE",
        "SCHEDULE",
        "NEXT",
        "RUN",
        "LAST",
        "RUN",
    ]
    assert lines[1].split()[:7] == [
        "reminder",
        "outbound_message",
        "runtime",
        "telegram:7",  # the operator sees every job, with its owner
        "scheduled",
        "every",
        "3600s",
    ]
    assert "cron '0 3 * * *'" in lines[2]
    assert "+08:00" in lines[2]  # next run shown in time.timezone
    assert await jobs(loaded, "list", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(j["id"], j["owner"]) for j in listed] == [
        ("reminder", "telegram:7"),
        ("session.cleanup", None),
    ]


async def test_pause_resume_run_and_delete_change_the_database(
    loaded: LoadedConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs(loaded, "pause", "reminder") == 0
    assert capsys.readouterr().out.startswith("reminder: paused")
    assert await jobs(loaded, "resume", "reminder") == 0
    assert capsys.readouterr().out.startswith("reminder: scheduled, next run 20")
    assert await jobs(loaded, "run", "reminder") == 0
    assert "within 60s" in capsys.readouterr().out
    async with Database(loaded.storage_path) as db:
        record = await db.read(lambda c: store.get_job(c, "reminder"))
    assert record is not None
    assert record.run_requested_at is not None
    assert not record.paused
    assert await jobs(loaded, "show", "reminder") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["definition"]["payload"] == {"text": "drink water"}
    assert shown["runs"] == []
    assert await jobs(loaded, "delete", "reminder") == 0
    async with Database(loaded.storage_path) as db:
        assert await db.read(lambda c: store.get_job(c, "reminder")) is None


async def test_errors_go_to_stderr_with_a_failing_exit_code(
    loaded: LoadedConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs(loaded, "delete", "session.cleanup") == 1
    assert "is defined in the config file" in capsys.readouterr().err
    assert await jobs(loaded, "show", "ghost") == 1
    assert capsys.readouterr().err == "error: no job with id 'ghost'\n"


def test_jobs_without_a_sub_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.cli.program import main

    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: picobot jobs")
    for name in ("list", "show", "run", "pause", "resume", "delete"):
        assert f"    {name}" in out
