"""`picobot doctor` with storage on PostgreSQL: reachable, version, schema,
and never the password (storage/postgres/health.py)."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from gateway.cli.doctor.main import run_doctor
from storage.errors import StorageUnusable
from storage.postgres.db import PostgresDatabase
from storage.postgres.health import ServerUnreachable, inspect_server
from storage.postgres.migrations import MIGRATIONS, SCHEMA_TABLE
from tests.pgcluster import PostgresServer

PASSWORD = "s3cret-Pa55word"
API_KEY = "sk-doctor-test-key-0123456789"


async def doctor(tmp_path: Path, url: str, **env: str) -> tuple[int, str]:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "providers": {"default": {"type": "openai", "api_key": "${OPENAI_API_KEY}"}},
                "storage": {"url": url},
            }
        )
    )
    config.chmod(0o600)
    out = io.StringIO()
    environ = {"PICOBOT_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": API_KEY, **env}
    code = await run_doctor(str(config), environ, probe=False, out=out, cwd=tmp_path)
    return code, out.getvalue()


def storage_line(text: str) -> str:
    return next(line for line in text.splitlines() if "storage:" in line)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but not listening: a connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_an_unreachable_server_raises_a_redacted_reason(closed_port: int) -> None:
    url = f"postgresql://picobot:{PASSWORD}@127.0.0.1:{closed_port}/picobot"

    with pytest.raises(ServerUnreachable) as caught:
        inspect_server(url, timeout_secs=2)

    message = str(caught.value)
    assert message.startswith(f"cannot connect to postgresql://picobot:***@127.0.0.1:{closed_port}")
    assert "\n" not in message
    assert PASSWORD not in message


async def test_doctor_reports_an_unreachable_server_without_the_password(
    tmp_path: Path, closed_port: int
) -> None:
    url = f"postgresql://picobot:${{PICOBOT_DB_PASSWORD}}@127.0.0.1:{closed_port}/picobot"

    code, text = await doctor(tmp_path, url, PICOBOT_DB_PASSWORD=PASSWORD)

    assert code == 1
    line = storage_line(text)
    assert line.startswith("problem")
    assert "picobot:***@127.0.0.1" in line
    assert "start the server" in text  # the hint
    assert PASSWORD not in text
    assert "storage dir" not in text  # no SQLite folder to check


@pytest.mark.postgres
def test_an_empty_database_is_healthy(postgres_url: str) -> None:
    health = inspect_server(postgres_url)

    assert health.schema_version == 0
    assert health.latest_schema == len(MIGRATIONS)
    assert not health.too_old
    assert health.server_version_text[0].isdigit()


@pytest.mark.postgres
async def test_doctor_says_an_empty_database_gets_its_schema_at_first_start(
    tmp_path: Path, postgres_url: str
) -> None:
    code, text = await doctor(tmp_path, postgres_url)

    assert code == 0, text
    line = storage_line(text)
    assert line.startswith("ok")
    assert "PostgreSQL 1" in line
    assert "picobot creates the schema at first start" in line


@pytest.mark.postgres
async def test_doctor_reports_the_current_schema(tmp_path: Path, postgres_url: str) -> None:
    async with PostgresDatabase(postgres_url):
        pass  # migrated

    code, text = await doctor(tmp_path, postgres_url)

    assert code == 0, text
    line = storage_line(text)
    assert line.startswith("ok")
    assert f"schema version {len(MIGRATIONS)}" in line
    assert "migration(s) will run" not in line


@pytest.mark.postgres
async def test_doctor_refuses_a_schema_newer_than_this_picobot(
    tmp_path: Path, postgres_url: str
) -> None:
    async with PostgresDatabase(postgres_url):
        pass
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {SCHEMA_TABLE} SET version = %s", (len(MIGRATIONS) + 1,))

    code, text = await doctor(tmp_path, postgres_url)

    assert code == 1
    line = storage_line(text)
    assert line.startswith("problem")
    assert "newer than this picobot" in line
    assert "upgrade picobot" in text


@pytest.mark.postgres
async def test_doctor_reports_a_missing_database(tmp_path: Path, postgres_url: str) -> None:
    missing = postgres_url.rsplit("/", 1)[0] + "/h2_no_such_database"

    code, text = await doctor(tmp_path, missing)

    assert code == 1
    line = storage_line(text)
    assert line.startswith("problem")
    assert 'database "h2_no_such_database" does not exist' in line


@pytest.mark.postgres
async def test_a_database_not_in_utf8_is_refused_by_doctor_and_the_gateway(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """Chats hold any character: a LATIN1 database would fail on the first
    emoji, so doctor says so and the gateway's storage will not open it."""
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(
            "CREATE DATABASE latin1_db ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
            "TEMPLATE template0"
        )
    url = postgres_server.database_url("latin1_db")

    code, text = await doctor(tmp_path, url)
    assert code == 1
    line = storage_line(text)
    assert line.startswith("problem")
    assert "encoding is LATIN1; picobot needs UTF8" in line
    assert "ENCODING 'UTF8'" in text

    with pytest.raises(StorageUnusable, match="encoding is LATIN1"):
        await PostgresDatabase(url).open()
    with psycopg.connect(url) as conn:  # left as it was: no table created
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
