"""`picobot usage` and `picobot limits` on a real database file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.program import main
from gateway.config.loading import load_config
from storage.sql.spend import Call, Override
from storage.sqlite.db import Database
from storage.store import Store
from tests.support import logging_restored


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The commands send their log lines to stderr (configure_logging): undo it."""
    with logging_restored():
        yield


def _write_config(tmp_path: Path, limits: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    config = {
        "storage": {"path": str(tmp_path / "db.sqlite")},
        "agents": {"default": {}, "helper": {}},
        "limits": limits,
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file whose database is in tmp_path (PICOBOT_HOME too), with
    one budget in the file: 500,000 tokens a day for every sender."""
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    return _write_config(tmp_path, {"sender": {"daily_tokens": 500000}})


def _today() -> datetime:
    return datetime.now(UTC)  # time.timezone is UTC: days are UTC dates


def _call(day: datetime, sender: str, agent: str, model: str, n: int, cost: float) -> Call:
    return Call(
        "telegram", "c1", sender, agent, model, "turn", None, f"{day:%Y-%m-%d}",
        n, n // 10, n // 2, n // 4, cost,
    )  # fmt: skip


async def _seed(db_path: Path, calls: list[Call]) -> None:
    async with Database(db_path) as db:
        spend = Store(db).spend
        for call in calls:
            await spend.charge(call, [], _today())


async def _stored(db_path: Path) -> list[Override]:
    async with Database(db_path) as db:
        return await Store(db).spend.overrides()


def _db(config: Path) -> Path:
    return load_config(config, environ={}).storage_path


def _run(config: Path, *argv: str) -> int:
    return main([*argv, "--config", str(config)])


# -- picobot usage ------------------------------------------------------------------------


def test_usage_reports_each_day_agent_and_model_with_a_total(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    today, yesterday, long_ago = _today(), _today() - timedelta(days=1), _today() - timedelta(45)
    asyncio.run(
        _seed(
            _db(config),
            [
                _call(yesterday, "42", "default", "gpt-4o-mini", 1000, 0.01),
                _call(yesterday, "42", "default", "gpt-4o-mini", 3000, 0.02),
                _call(today, "42", "helper", "claude", 200, 0.5),
                _call(today, "7", "default", "gpt-4o-mini", 10, 0.001),
                _call(long_ago, "42", "default", "gpt-4o-mini", 99999, 9.0),  # before 30 days
            ],
        )
    )
    capsys.readouterr()

    assert _run(config, "usage") == 0
    lines = capsys.readouterr().out.splitlines()
    since = f"{today - timedelta(days=29):%Y-%m-%d}"
    assert lines[0] == f"model calls in the last 30 days (since {since}, UTC)"
    assert lines[1].split() == [
        "day", "agent", "model", "calls", "input", "output", "cache", "read", "cache", "write",
        "cost",
    ]  # fmt: skip
    rows = [line.split() for line in lines[2:]]
    assert rows == [
        [f"{yesterday:%Y-%m-%d}", "default", "gpt-4o-mini", "2", "4,000", "400", "2,000", "1,000",
         "0.0300"],
        [f"{today:%Y-%m-%d}", "default", "gpt-4o-mini", "1", "10", "1", "5", "2", "0.0010"],
        [f"{today:%Y-%m-%d}", "helper", "claude", "1", "200", "20", "100", "50", "0.5000"],
        ["total", "4", "4,210", "421", "2,105", "1,052", "0.5310"],
    ]  # fmt: skip

    assert _run(config, "usage", "--days", "60", "--user", "telegram:42", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert [(r["day"], r["agent"], r["calls"]) for r in found] == [
        (f"{long_ago:%Y-%m-%d}", "default", 1),
        (f"{yesterday:%Y-%m-%d}", "default", 2),
        (f"{today:%Y-%m-%d}", "helper", 1),
    ]  # sender 7's call is left out
    assert found[1] == {
        "day": f"{yesterday:%Y-%m-%d}",
        "agent": "default",
        "model": "gpt-4o-mini",
        "calls": 2,
        "input_tokens": 4000,
        "output_tokens": 400,
        "cache_read_tokens": 2000,
        "cache_write_tokens": 1000,
        "cost": pytest.approx(0.03),
    }


def test_usage_without_calls_says_so(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_seed(_db(config), [_call(_today(), "42", "default", "m", 10, 0.1)]))
    capsys.readouterr()
    assert _run(config, "usage", "--user", "telegram:nobody", "--days", "1") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(
        "no model calls were recorded for telegram:nobody in the last 1 day (since "
    )
    assert captured.err == ""
    assert _run(config, "usage", "--user", "telegram:nobody", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []


def test_usage_refuses_a_bad_user_or_day_count(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config, "usage", "--user", "telegram") == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "error: --user 'telegram' is not CHANNEL:SENDER_ID (e.g. telegram:42)"
    ]
    assert captured.out == ""
    assert _run(config, "usage", "--days", "0") == 2
    assert capsys.readouterr().err.startswith("error: --days 0")


# -- picobot limits -----------------------------------------------------------------------


def test_limits_lists_the_file_and_the_stored_budgets(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config, "limits", "set", "chat", "feishu:oc_team", "monthly_cost", "20") == 0
    assert _run(config, "limits", "set", "sender", "*", "daily_tokens", "1000") == 0
    capsys.readouterr()

    assert main(["limits", "--config", str(config)]) == 0  # `list` is the default
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["scope", "key", "field", "value", "from"]
    rows = [line.split(None, 4) for line in lines[1:-1]]
    assert [r[:4] for r in rows] == [
        ["sender", "*", "daily_tokens", "500,000"],
        ["sender", "*", "daily_tokens", "1,000"],
        ["chat", "feishu:oc_team", "monthly_cost", "20"],
    ]
    assert rows[0][4] == "file: limits.sender (the stored one wins)"
    assert rows[1][4].startswith("stored: set by cli at ")
    assert rows[2][4].startswith("stored: set by cli at ")
    assert lines[-1].startswith("key *: the scope's default")

    # --config before the command is kept too
    assert main(["limits", "--config", str(config), "list"]) == 0
    assert "feishu:oc_team" in capsys.readouterr().out


def test_limits_set_list_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    config = _write_config(tmp_path, {"users": {"telegram:42": {"monthly_tokens": 9000}}})
    assert _run(config, "limits", "set", "sender", "telegram:42", "daily_tokens", "1_000") == 0
    out = capsys.readouterr().out
    assert out.startswith("set sender telegram:42 daily_tokens = 1,000 (stored, set by cli)")
    assert "a running gateway applies the change within 5 s" in out
    assert _run(config, "limits", "set", "agent", "helper", "daily_cost", "2.5") == 0
    capsys.readouterr()
    stored = asyncio.run(_stored(_db(config)))
    assert [(o.scope, o.key, o.field, o.value, o.set_by) for o in stored] == [
        ("agent", "helper", "daily_cost", 2.5, "cli"),
        ("sender", "telegram:42", "daily_tokens", 1000.0, "cli"),
    ]

    assert _run(config, "limits", "list") == 0
    rows = [line.split(None, 4) for line in capsys.readouterr().out.splitlines()[1:-1]]
    assert [(r[0], r[1], r[2], r[3], r[4].split(" at ")[0]) for r in rows] == [
        ("sender", "telegram:42", "daily_tokens", "1,000", "stored: set by cli"),
        ("sender", "telegram:42", "monthly_tokens", "9,000", "file: limits.users"),
        ("agent", "helper", "daily_cost", "2.5", "stored: set by cli"),
    ]

    assert _run(config, "limits", "clear", "sender", "telegram:42", "daily_tokens") == 0
    assert capsys.readouterr().out.startswith(
        "cleared 1 stored budget of sender telegram:42 daily_tokens; a running gateway"
    )
    assert _run(config, "limits", "clear", "sender", "telegram:42") == 1
    assert "nothing to clear" in capsys.readouterr().out
    assert [o.key for o in asyncio.run(_stored(_db(config)))] == ["helper"]
    assert _run(config, "limits", "clear", "agent", "helper") == 0
    assert asyncio.run(_stored(_db(config))) == []


def test_limits_value_none_is_stored_as_no_limit(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config, "limits", "set", "total", "*", "monthly_cost", "none") == 0
    assert capsys.readouterr().out.startswith(
        "set total * monthly_cost = none (no limit) (stored, set by cli)"
    )
    [stored] = asyncio.run(_stored(_db(config)))
    assert (stored.scope, stored.key, stored.field, stored.value) == (
        "total",
        "*",
        "monthly_cost",
        None,
    )
    assert _run(config, "limits", "list") == 0
    listed = capsys.readouterr().out
    assert "total   *    monthly_cost  none (no limit)  stored: set by cli at " in listed


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["set", "sender", "telegram:42", "weekly_tokens", "5"],
            "error: no budget field 'weekly_tokens' "
            "(use daily_tokens, monthly_tokens, daily_cost, monthly_cost)",
        ),
        (
            ["set", "user", "telegram:42", "daily_tokens", "5"],
            "error: no scope 'user' (use sender, chat, agent, total)",
        ),
        (
            ["set", "sender", "telegram:42", "daily_tokens", "1.5"],
            "error: '1.5' is not a budget for daily_tokens (a whole number of tokens, or none)",
        ),
        (
            ["set", "sender", "telegram:42", "daily_tokens", "inf"],
            "error: 'inf' is not a budget for daily_tokens (a whole number of tokens, or none)",
        ),
        (
            ["set", "chat", "42", "daily_cost", "1"],
            "error: chat key '42' is not channel:id (e.g. telegram:42) or \"*\"",
        ),
        (
            ["set", "agent", "nobody", "daily_cost", "1"],
            "error: no agent 'nobody' in the config (agents: default, helper)",
        ),
        (
            ["clear", "total", "telegram:42"],
            "error: the total scope has one key, \"*\", not 'telegram:42'",
        ),
        (
            ["clear", "sender", "*", "tokens"],
            "error: no budget field 'tokens' "
            "(use daily_tokens, monthly_tokens, daily_cost, monthly_cost)",
        ),
    ],
)
def test_limits_refuses_a_bad_argument_with_one_line(
    config: Path, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    assert _run(config, "limits", *argv) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [error]
    assert captured.out == ""
    assert asyncio.run(_stored(_db(config))) == []
