"""The PostgreSQL backend: one connection, its thread, migrations under a lock.

The same shape as the SQLite backend (storage.database): one psycopg
connection (psycopg 3, its sync API, autocommit) lives in one worker
thread (storage/postgres/worker.py); reads and the writer's group commits run there, a whole transaction
per thread hop, so the transaction functions of storage/sql/ run unchanged
(storage/postgres/connection.py).

- `open` connects (10 s connect timeout unless the URL sets one), refuses a
  server older than PostgreSQL 14 and a database not in UTF8, and applies the migrations of
  storage/postgres/migrations.py under a transaction-scoped advisory lock,
  so that two gateways starting at once against an empty database migrate it
  once; the second waits, then finds the schema current.
- A lost connection (the server restarted, a network cut) fails the batch in
  flight with `StorageUnavailable` (nothing of it committed) and the next
  call connects again; until a commit passes, a probe every
  `probe_interval_secs` reconnects and clears `write_failure` (/ready).
- `describe` and every message name the URL with its password masked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Final, TypeVar

import psycopg
import structlog

from storage.database import Connection, Database
from storage.errors import SchemaTooNew, StorageUnavailable, StorageUnusable
from storage.postgres.connection import PgConnection, as_storage_error
from storage.postgres.migrations import MIGRATIONS, SCHEMA_TABLE
from storage.postgres.worker import WorkerThread
from storage.url import redact_url

__all__ = ["MIN_SERVER_VERSION", "PostgresDatabase", "connect", "schema_version_of"]

log = structlog.get_logger(__name__)
T = TypeVar("T")

MIN_SERVER_VERSION: Final = 140000  # PostgreSQL 14
REQUIRED_ENCODING: Final = "UTF8"  # chats hold any character
# pg_advisory_xact_lock key for migrations: "picobot" in ASCII, as a bigint
_MIGRATION_LOCK: Final = 0x7069636F626F74


class PostgresDatabase(Database):
    def __init__(
        self,
        url: str,
        *,
        write_queue_capacity: int = 4096,
        commit_spacing_secs: float = 0.001,
        probe_interval_secs: float = 1.0,
    ) -> None:
        super().__init__(
            write_queue_capacity=write_queue_capacity, commit_spacing_secs=commit_spacing_secs
        )
        self.url = url
        self._conn: PgConnection | None = None
        self._thread = WorkerThread("storage-pg")
        self._opened = False
        self._probe_interval = probe_interval_secs
        self._prober: asyncio.Task[None] | None = None
        self._stop_probing = asyncio.Event()
        self.server_version = 0

    @property
    def describe(self) -> str:
        return redact_url(self.url)

    # -- lifecycle ---------------------------------------------------------
    async def open(self) -> PostgresDatabase:
        """Raises StorageUnusable (no server, a refused login, a server older
        than 14, a failed migration), SchemaTooNew."""
        if self._opened or self._closed:
            raise RuntimeError("Database.open() called twice")
        self._opened = True
        try:
            self.schema_version = await self._in_thread(self._connect_and_migrate)
        except BaseException:
            await self._in_thread(self._drop_connection)
            await self._thread.stop()
            raise
        self._start_writer()
        self._prober = asyncio.create_task(self._probe_loop(), name="storage-pg-prober")
        return self

    async def _stop_beside_writer(self) -> None:
        if self._prober is not None:
            self._stop_probing.set()
            await self._prober

    async def _close_connections(self) -> None:
        if self._opened:
            await self._in_thread(self._drop_connection)
        await self._thread.stop()

    async def __aenter__(self) -> PostgresDatabase:
        return await self.open()

    # -- several workers ---------------------------------------------------------
    shared = True

    async def listen(
        self, channel: str, on_payload: Callable[[str], None], on_listening: Callable[[], None]
    ) -> None:
        from storage.postgres.listen import listen  # only where workers run

        await listen(self.url, channel, on_payload, on_listening)

    # -- access --------------------------------------------------------------
    async def read(self, fn: Callable[[Connection], T]) -> T:
        return await self._in_thread(self._with_connection, fn)

    async def _run_writes(self, fn: Callable[[Connection], T]) -> T:
        return await self._in_thread(self._with_connection, fn)

    @staticmethod
    def _probe(conn: Connection) -> None:
        conn.execute(f"SELECT version FROM {SCHEMA_TABLE}").fetchone()

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._thread.call(fn, *args)  # StorageClosed once stopped

    async def _probe_loop(self) -> None:
        """While writes fail, try one every round: it reconnects, and clears
        `write_failure` once the server takes writes again."""
        while not self._closed:
            try:  # close() sets _closed and wakes us; never cancelled mid-probe
                async with asyncio.timeout(self._probe_interval):
                    await self._stop_probing.wait()
            except TimeoutError:
                pass
            if self._write_failure is not None and not self._closed:
                await self.probe_writes()

    # -- in the thread ---------------------------------------------------------
    def _with_connection(self, fn: Callable[[Connection], T]) -> T:
        conn = self._conn
        if conn is None or conn.raw.closed or conn.raw.broken:
            self._drop_connection()
            conn = self._conn = PgConnection(self._connect_raw(unavailable=True))
        try:
            return fn(conn)  # type: ignore[arg-type]  # the sqlite3 subset, see connection.py
        except StorageUnavailable:
            if conn.raw.broken or conn.raw.closed:
                self._drop_connection()
            raise

    def _connect_raw(self, *, unavailable: bool) -> psycopg.Connection[tuple[Any, ...]]:
        try:
            raw = connect(self.url)
        except psycopg.Error as exc:
            reason = f"cannot connect to {self.describe}: {as_storage_error(exc)}"
            if unavailable:
                raise StorageUnavailable(reason) from exc
            raise StorageUnusable(reason) from exc
        if raw.info.server_version < MIN_SERVER_VERSION:
            version = raw.info.parameter_status("server_version") or "?"
            raw.close()
            raise StorageUnusable(
                f"{self.describe}: PostgreSQL {version!s} is too old; "
                "picobot needs PostgreSQL 14 or newer"
            )
        encoding = raw.info.parameter_status("server_encoding") or "?"
        if encoding != REQUIRED_ENCODING:
            raw.close()
            raise StorageUnusable(
                f"{self.describe}: the database's encoding is {encoding}; picobot needs "
                f"{REQUIRED_ENCODING} (CREATE DATABASE … ENCODING 'UTF8', docs/storage.md)"
            )
        return raw

    def _connect_and_migrate(self) -> int:
        raw = self._connect_raw(unavailable=False)
        self._conn = PgConnection(raw)
        self.server_version = raw.info.server_version
        try:
            return _migrate(self._conn, self.describe)
        except psycopg.Error as exc:
            raise StorageUnusable(f"{self.describe}: {as_storage_error(exc)}") from exc
        except StorageUnavailable as exc:
            raise StorageUnusable(f"{self.describe}: {exc.reason}") from exc

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):  # it was gone already
                conn.close()


def connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection to `url` (blocking: call it in a thread)."""
    options: dict[str, Any] = {"autocommit": True, "application_name": "picobot"}
    if "connect_timeout" not in url:
        options["connect_timeout"] = 10
    return psycopg.connect(url, **options)


def schema_version_of(conn: PgConnection) -> int:
    """The stored schema version, 0 for a database picobot never used."""
    exists = conn.execute("SELECT to_regclass(?) IS NOT NULL", (SCHEMA_TABLE,)).fetchone()[0]
    if not exists:
        return 0
    row = conn.execute(f"SELECT version FROM {SCHEMA_TABLE}").fetchone()
    return int(row[0]) if row is not None else 0


def _migrate(conn: PgConnection, where: str) -> int:
    latest = len(MIGRATIONS)
    if schema_version_of(conn) == latest:
        return latest  # the usual start: no lock needed
    conn.execute("BEGIN")
    try:
        # held to the end of this transaction: a second gateway starting now
        # waits here, then reads the version this one committed
        conn.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
        conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version BIGINT NOT NULL)")
        current = schema_version_of(conn)
        if current > latest:
            raise SchemaTooNew(
                f"database schema version {current} ({where}) is newer than this picobot "
                f"understands ({latest}); upgrade picobot or restore a backup"
            )
        if current == 0:
            conn.execute(f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (0)")
        for version in range(current + 1, latest + 1):
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"UPDATE {SCHEMA_TABLE} SET version = ?", (version,))
            log.info("storage_migrated", version=version, backend="postgresql")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return latest


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside literals)."""
    return [s.strip() for s in script.split(";") if s.strip()]
