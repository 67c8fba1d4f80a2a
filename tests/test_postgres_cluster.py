"""The throwaway cluster of tests/postgres.py is what the PostgreSQL tests rely on:
a recent server, reachable on loopback only, one empty database per request."""

from __future__ import annotations

import psycopg
import pytest

from tests.postgres import PostgresServer, storage_backends


def _user_tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.postgres
def test_server_is_recent_and_reachable(postgres_server: PostgresServer) -> None:
    with psycopg.connect(postgres_server.url) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
    assert version is not None
    assert int(version[0]) >= 140000


@pytest.mark.postgres
def test_listens_on_loopback_only(postgres_server: PostgresServer) -> None:
    assert postgres_server.url.startswith(
        f"postgresql://postgres@127.0.0.1:{postgres_server.port}/"
    )
    with psycopg.connect(postgres_server.url) as conn:
        listen = conn.execute("SHOW listen_addresses").fetchone()
        peer = conn.execute("SELECT host(inet_server_addr())").fetchone()
    assert listen == ("127.0.0.1",)
    assert peer == ("127.0.0.1",)


@pytest.mark.postgres
def test_new_databases_are_distinct_and_empty(postgres_server: PostgresServer) -> None:
    first, second = postgres_server.new_database(), postgres_server.new_database()
    assert first != second
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute("CREATE TABLE marker (id int)")
    assert _user_tables(first) == ["marker"]
    assert _user_tables(second) == []
    with psycopg.connect(second) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
    assert name is not None
    assert second.endswith(f"/{name[0]}")


@pytest.mark.postgres
def test_postgres_url_is_a_fresh_database(postgres_url: str) -> None:
    assert _user_tables(postgres_url) == []


@storage_backends  # marks only its postgres case: the sqlite one runs without a server
def test_storage_url_per_backend(backend: str, storage_url: str) -> None:
    prefix = {"sqlite": "sqlite:///", "postgres": "postgresql://"}[backend]
    assert storage_url.startswith(prefix)
