"""Starting `picobot gateway` processes on PostgreSQL (issue 53): two at once
against an empty database migrate it once and both start; a database written
by a newer picobot is refused and left as it was.

(A server that cannot be reached, with the password masked in the one-line
error, is tests/gateway/config/test_storage_url.py's.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from storage.postgres.migrations import MIGRATIONS
from tests.fakes.openai_server import FakeOpenAI
from tests.support import (
    GatewayProcess,
    child_env,
    process_config,
    run_picobot,
    spawn_gateway,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _config(llm: FakeOpenAI, url: str) -> dict[str, Any]:
    return process_config(llm.base_url, storage={"url": url})


async def _ready_status(gw: GatewayProcess) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{gw.port}/ready") as response,
    ):
        return response.status


def _schema_rows(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT version FROM picobot_schema").fetchall()


async def test_two_gateways_started_at_once_migrate_an_empty_database_once(
    tmp_path: Path, llm: FakeOpenAI, postgres_url: str
) -> None:
    homes = [tmp_path / "home-a", tmp_path / "home-b"]
    for home in homes:
        home.mkdir()
    config = _config(llm, postgres_url)
    gateways = await asyncio.gather(
        *(spawn_gateway(config, home, child_env(home)) for home in homes)
    )
    try:
        assert len({gw.port for gw in gateways}) == 2
        assert [await _ready_status(gw) for gw in gateways] == [200, 200]
    finally:
        codes = [await gw.stop() for gw in gateways]
    assert codes == [0, 0]

    migrated = [line for gw in gateways for line in gw.events("storage_migrated")]
    latest = len(MIGRATIONS)
    assert [(m["version"], m["backend"]) for m in migrated] == [
        (version, "postgresql") for version in range(1, latest + 1)
    ]  # each version once, by one of them
    assert await asyncio.to_thread(_schema_rows, postgres_url) == [(latest,)]


def _pretend_a_newer_picobot_wrote(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE picobot_schema (version BIGINT NOT NULL)")
        conn.execute("INSERT INTO picobot_schema (version) VALUES (99)")


def _tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


async def test_a_database_of_a_newer_picobot_is_refused_and_left_alone(
    home: Path, llm: FakeOpenAI, postgres_url: str
) -> None:
    await asyncio.to_thread(_pretend_a_newer_picobot_wrote, postgres_url)
    path = home / "config.json"
    path.write_text(json.dumps(_config(llm, postgres_url)))
    code, text = await run_picobot(home, "gateway", "--config", str(path))

    assert code != 0, text
    assert "database schema version 99" in text, text
    assert f"newer than this picobot understands ({len(MIGRATIONS)})" in text, text
    assert "gateway_started" not in text
    assert await asyncio.to_thread(_tables, postgres_url) == ["picobot_schema"]
    assert await asyncio.to_thread(_schema_rows, postgres_url) == [(99,)]
