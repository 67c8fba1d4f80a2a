"""What only the PostgreSQL backend has: the SQL translation of its connection,
its rows, its own schema version, the same schema as SQLite's, and a server
that goes away mid-use (issue 53). The contract both backends keep is the rest
of tests/storage/, run on each."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from storage.backends import open_database
from storage.database import Connection, Database
from storage.errors import DatabaseError, SchemaTooNew, StorageUnavailable
from storage.postgres.connection import PgConnection, Row, numbered, translate
from storage.postgres.db import PostgresDatabase, connect
from storage.postgres.migrations import MIGRATIONS, SCHEMA_TABLE
from storage.sqlite.db import SqliteDatabase
from tests.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def _insert(conn: Connection, key: str) -> None:
    conn.execute(
        "INSERT INTO channel_state (channel, key, value, updated_at) VALUES ('t', ?, 'v', 'now')",
        (key,),
    )


def _keys(conn: Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM channel_state ORDER BY key")]


@pytest.fixture
def raw(postgres_url: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """A connection of our own beside the gateway's (autocommit)."""
    conn = connect(postgres_url)
    try:
        yield conn
    finally:
        conn.close()


# --- translate(): sqlite3's SQL in psycopg's placeholders -------------------------------


@pytest.mark.parametrize(
    ("sqlite", "postgres"),
    [
        ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s"),
        ("UPDATE t SET a = :value WHERE id = :id", "UPDATE t SET a = %(value)s WHERE id = %(id)s"),
        ("SELECT a::text FROM t", "SELECT a::text FROM t"),  # a cast, not a name
        # nothing inside quotes is a placeholder
        ("SELECT '?', 'it''s ?', \"odd?\" FROM t WHERE a = ?",
         "SELECT '?', 'it''s ?', \"odd?\" FROM t WHERE a = %s"),
        ("SELECT ':name' FROM t", "SELECT ':name' FROM t"),
        # psycopg reads `%` everywhere, literals included
        ("SELECT a % 2 FROM t WHERE b LIKE 'x%'", "SELECT a %% 2 FROM t WHERE b LIKE 'x%%'"),
        ("SELECT a FROM t WHERE b IS NOT ?", "SELECT a FROM t WHERE b IS DISTINCT FROM %s"),
        ("SELECT a FROM t INDEXED BY t_by_b WHERE b = ?", "SELECT a FROM t WHERE b = %s"),
        ("SELECT a FROM t WHERE julianday(b) < julianday(?)",
         "SELECT a FROM t WHERE CAST(b AS timestamptz) < CAST(%s AS timestamptz)"),
        ("SELECT a FROM t WHERE k GLOB 'ab:c*'", "SELECT a FROM t WHERE k LIKE 'ab:c%%'"),
        ("BEGIN IMMEDIATE", "BEGIN"),
    ],
)  # fmt: skip
def test_translate(sqlite: str, postgres: str) -> None:
    assert translate(sqlite) == postgres


def test_a_glob_that_is_not_a_plain_prefix_is_left_alone() -> None:
    """Only `GLOB 'prefix*'` has a LIKE twin; anything else must fail loudly
    on PostgreSQL rather than match something else."""
    assert "LIKE" not in translate("SELECT a FROM t WHERE k GLOB 'a?b*'")


# --- rows ---------------------------------------------------------------------------------


def test_a_row_reads_by_index_by_name_and_as_a_sequence() -> None:
    row = Row((1, "x", None), {"id": 0, "name": 1, "note": 2})
    assert (row[0], row["name"], row[-1], row[1:]) == (1, "x", None, ("x", None))
    assert list(row) == [1, "x", None]
    assert len(row) == 3
    assert row.keys() == ["id", "name", "note"]
    assert row == Row((1, "x", None), {"a": 0, "b": 1, "c": 2})  # values, as sqlite3.Row
    assert hash(row) == hash(Row((1, "x", None), {}))
    with pytest.raises(KeyError):
        row["missing"]


def test_rows_from_the_server_and_plain_tuples_without_a_row_factory(
    raw: psycopg.Connection[tuple[Any, ...]],
) -> None:
    conn = PgConnection(raw)
    row = conn.execute("SELECT 1 AS one, 'two' AS two").fetchone()
    assert (row["one"], row["two"], tuple(row)) == (1, "two", (1, "two"))
    cursor = conn.cursor()
    cursor.row_factory = None
    assert cursor.execute("SELECT ?::int, ?", (3, True)).fetchall() == [(3, 1)]  # bool as 0/1
    assert [tuple(r) for r in conn.execute("SELECT generate_series(1, 3)")] == [(1,), (2,), (3,)]


def test_a_statement_leaves_the_unread_rows_of_the_one_before_readable(
    raw: psycopg.Connection[tuple[Any, ...]],
) -> None:
    """Each result is read on its own, so reading two results interleaved works
    as on sqlite3 (as a loop that writes while it reads does)."""
    conn = PgConnection(raw)
    first = conn.execute("SELECT generate_series(1, 5) AS n")
    assert first.fetchone()["n"] == 1
    second = conn.execute("SELECT 'x' AS letter, generate_series(1, 2)")
    assert [r["letter"] for r in second.fetchmany(1)] == ["x"]
    assert [r["n"] for r in first.fetchmany(2)] == [2, 3]
    third = conn.execute("SELECT 7")
    assert [tuple(r) for r in second] == [("x", 2)]
    assert [r["n"] for r in first.fetchall()] == [4, 5]
    assert third.fetchall() == [Row((7,), {"?column?": 0})]
    assert first.fetchone() is None


def test_executemany_counts_the_rows_it_changed(
    raw: psycopg.Connection[tuple[Any, ...]],
) -> None:
    rows = 20
    conn = PgConnection(raw)
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, n BIGINT)")
    conn.executemany("INSERT INTO t VALUES (?, 0)", [(i,) for i in range(rows)])
    changed = conn.executemany("UPDATE t SET n = n + 1 WHERE id >= ?", [(0,), (rows - 1,)])
    assert changed.rowcount == rows + 1
    assert conn.execute("SELECT sum(n) FROM t").fetchone()[0] == rows + 1


@pytest.mark.parametrize(
    ("sqlite", "libpq", "names", "count"),
    [
        ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = $1 AND c = $2",
         None, 2),
        ("UPDATE t SET a = :v, b = :w WHERE a = :v", "UPDATE t SET a = $1, b = $2 WHERE a = $1",
         ("v", "w"), 2),
        ("SELECT '100%', '?' FROM t WHERE a LIKE 'x%' AND b = ?",
         "SELECT '100%', '?' FROM t WHERE a LIKE 'x%' AND b = $1", None, 1),
    ],
)  # fmt: skip
def test_numbered_gives_libpq_placeholders(
    sqlite: str, libpq: str, names: tuple[str, ...] | None, count: int
) -> None:
    assert numbered(sqlite) == (libpq.encode(), names, count)


def test_a_statement_run_again_is_prepared_and_answers_the_same(
    raw: psycopg.Connection[tuple[Any, ...]],
) -> None:
    """The second run of a statement prepares it on the server; the answers do
    not change, a ROLLBACK keeps it prepared, and values of another type make
    a statement of their own."""
    conn = PgConnection(raw)
    sql = "SELECT CAST(? AS text) || '-' AS v"
    answers = [conn.execute(sql, (f"run{n}",)).fetchone()["v"] for n in range(3)]
    assert answers == ["run0-", "run1-", "run2-"]
    conn.execute("BEGIN")
    conn.execute("ROLLBACK")
    assert conn.execute(sql, ("after",)).fetchone()["v"] == "after-"
    assert conn.execute(sql, (7,)).fetchone()["v"] == "7-"
    prepared = raw.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert prepared == (1,)  # one for text; the int8 variant ran once, unprepared


def test_parameters_that_do_not_fit_the_statement_are_refused(
    raw: psycopg.Connection[tuple[Any, ...]],
) -> None:
    conn = PgConnection(raw)
    with pytest.raises(DatabaseError, match="takes 2 parameters, 1 given"):
        conn.execute("SELECT ?, ?", (1,))
    with pytest.raises(DatabaseError, match=":y"):
        conn.execute("SELECT :x::int, :y::int", {"x": 1})
    assert conn.execute("SELECT :x::int + 1", {"x": 1}).fetchone()[0] == 2


def test_transaction_control_keeps_the_transaction_and_reports_errors(
    raw: psycopg.Connection[tuple[Any, ...]],
) -> None:
    """BEGIN, savepoints and COMMIT go straight through libpq: the transaction
    state follows, work rolled back to a savepoint is gone, and a refused
    command is the project's DatabaseError, not a lost connection."""
    conn = PgConnection(raw)
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    conn.execute("BEGIN")
    assert conn.in_transaction
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("SAVEPOINT job")
    conn.execute("INSERT INTO t VALUES (2)")
    conn.execute("ROLLBACK TO SAVEPOINT job")
    conn.execute("RELEASE SAVEPOINT job")
    conn.execute("COMMIT")
    assert not conn.in_transaction
    assert [tuple(r) for r in conn.execute("SELECT id FROM t")] == [(1,)]
    with pytest.raises(DatabaseError, match="only be used in transaction blocks") as refused:
        conn.execute("ROLLBACK TO SAVEPOINT job")  # outside a transaction
    assert not isinstance(refused.value, StorageUnavailable)


# --- migrations --------------------------------------------------------------------------


async def test_a_fresh_database_is_migrated_to_the_latest_version_and_a_newer_one_refused(
    postgres_url: str, raw: psycopg.Connection[tuple[Any, ...]]
) -> None:
    async with open_database(postgres_url) as db:
        assert db.schema_version == len(MIGRATIONS) == 5
    assert raw.execute(f"SELECT version FROM {SCHEMA_TABLE}").fetchall() == [(5,)]
    async with open_database(postgres_url) as db:  # current: opened as it is
        assert db.schema_version == 5
    raw.execute(f"UPDATE {SCHEMA_TABLE} SET version = version + 1")
    with pytest.raises(SchemaTooNew, match="newer than this picobot understands"):
        await open_database(postgres_url).open()


async def test_the_schema_is_sqlites_column_by_column_and_index_by_index(
    postgres_url: str, tmp_path: Path
) -> None:
    async with SqliteDatabase(tmp_path / "fresh.db") as lite:
        sqlite_schema = await lite.read(_sqlite_schema)
    async with open_database(postgres_url) as pg:
        postgres_schema = await pg.read(_postgres_schema)
    assert sqlite_schema[0] == postgres_schema[0]  # tables → columns, in order
    assert sqlite_schema[1] == postgres_schema[1]  # index names
    assert len(sqlite_schema[0]) > 10  # not two empty schemas
    assert len(sqlite_schema[1]) > 10


Schema = tuple[dict[str, list[str]], set[str]]


def _sqlite_schema(conn: Connection) -> Schema:
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    columns = {t: [c[1] for c in conn.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    indexes = {  # an index with no SQL is one SQLite made for a key (sqlite_autoindex_*)
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        )
    }
    return columns, indexes


def _postgres_schema(conn: Connection) -> Schema:
    columns: dict[str, list[str]] = {}
    for table, column in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name != ? ORDER BY table_name, ordinal_position",
        (SCHEMA_TABLE,),
    ):
        columns.setdefault(table, []).append(column)
    indexes = {  # the indexes of primary keys and UNIQUE constraints are the keys' own
        r[0]
        for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
            "AND indexname NOT IN (SELECT conname FROM pg_constraint)"
        )
    }
    return columns, indexes


# --- the server going away ---------------------------------------------------------------


def _failure(db: Database) -> str | None:
    """`write_failure` read through a call, so that mypy does not keep its
    narrowing across the awaits that change it."""
    return db.write_failure


async def test_a_server_gone_mid_use_fails_the_write_and_the_next_one_reconnects(
    postgres_url: str, raw: psycopg.Connection[tuple[Any, ...]]
) -> None:
    """The analogue of SQLite's lock held elsewhere: the gateway's connection is
    cut (as by a server restart); the write in flight fails as unavailable,
    nothing of it stays, and the next write connects again and clears
    `write_failure`."""
    db = open_database(postgres_url, probe_interval_secs=3600)  # no prober racing us
    assert isinstance(db, PostgresDatabase)
    async with db:
        await db.write(lambda c: _insert(c, "before"))
        pid = await db.read(lambda c: c.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert raw.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        results = await asyncio.gather(
            db.write(lambda c: _insert(c, "a")),
            db.write(lambda c: _insert(c, "b")),
            return_exceptions=True,
        )
        assert all(isinstance(r, StorageUnavailable) for r in results), results
        assert _failure(db) is not None
        await db.write(lambda c: _insert(c, "c"))
        assert db.write_failure is None
        assert await db.read(_keys) == ["before", "c"]
        again = await db.read(lambda c: c.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert again != pid


async def test_an_unreachable_server_is_unavailable_until_it_answers_again(
    postgres_url: str, postgres_server: PostgresServer
) -> None:
    """New connections refused (the database does not take them for now): the
    probe fails and keeps `write_failure`; once they are allowed it clears."""
    name = postgres_url.rsplit("/", 1)[1]
    db = open_database(postgres_url, probe_interval_secs=3600)
    with connect(postgres_server.url) as admin:  # the maintenance database's
        async with db:
            pid = await db.read(lambda c: c.execute("SELECT pg_backend_pid()").fetchone()[0])
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            try:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                with pytest.raises(StorageUnavailable):
                    await db.write(lambda c: _insert(c, "a"))
                assert not await db.probe_writes()
                assert _failure(db) is not None
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            assert await db.probe_writes()
            assert db.write_failure is None
            assert await db.read(_keys) == []
