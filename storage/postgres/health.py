"""A read-only look at a PostgreSQL server, for `picobot doctor`.

Connects with its own plain connection (never a `Database`) and a short
timeout, so it never creates, migrates or writes anything, whether or not a
gateway is connected. Everything it reports or raises names the URL with its
password masked. Blocking: run it in a thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

import psycopg

from storage.errors import DatabaseError, StorageUnavailable
from storage.postgres.connection import PgConnection
from storage.postgres.db import MIN_SERVER_VERSION, REQUIRED_ENCODING, schema_version_of
from storage.postgres.migrations import MIGRATIONS
from storage.sql.delivery.outbox import OutboxState, unsent_counts
from storage.url import redact_url

__all__ = ["MIN_SERVER_VERSION", "ServerHealth", "ServerUnreachable", "inspect_server"]

# libpq ignores a connect_timeout under 2 seconds (it takes 2 then)
_MIN_CONNECT_TIMEOUT: Final = 2


class ServerUnreachable(Exception):
    """No connection: no server listening, a refused login, a missing database.
    The message is one line, with the URL's password masked."""


@dataclass(frozen=True, slots=True)
class ServerHealth:
    where: str  # the URL, password masked
    server_version: int  # libpq's number: 150004 is 15.4
    server_version_text: str  # as the server names itself, "15.4 (Debian 15.4-1)"
    schema_version: int  # 0: picobot never used this database
    latest_schema: int  # what this picobot migrates to
    failed_outbox: int  # outbox rows that gave up (0 without an outbox table)
    encoding: str  # the database's, e.g. "UTF8"

    @property
    def too_old(self) -> bool:
        return self.server_version < MIN_SERVER_VERSION

    @property
    def wrong_encoding(self) -> bool:
        return self.encoding != REQUIRED_ENCODING


def inspect_server(url: str, *, timeout_secs: float = 5.0) -> ServerHealth:
    """Version, schema version and failed outbox rows of the database `url`
    names. Raises ServerUnreachable."""
    where = redact_url(url)
    try:
        raw = _connect(url, timeout_secs)
    except psycopg.Error as exc:
        raise ServerUnreachable(f"cannot connect to {where}: {_reason(exc, url)}") from None
    try:
        conn = PgConnection(raw)
        # a server busy elsewhere must not hang doctor past its timeout
        conn.execute(f"SET statement_timeout = {int(timeout_secs * 1000)}")
        version = schema_version_of(conn)
        failed = _failed_outbox(conn) if version else 0
        info = raw.info
        text = info.parameter_status("server_version") or str(info.server_version)
        encoding = info.parameter_status("server_encoding") or "?"
        return ServerHealth(
            where, info.server_version, text, version, len(MIGRATIONS), failed, encoding
        )
    except (psycopg.Error, DatabaseError, StorageUnavailable) as exc:
        reason = _reason(exc, url)
        raise ServerUnreachable(f"{where}: cannot read the schema: {reason}") from None
    finally:
        raw.close()


def _connect(url: str, timeout_secs: float) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection whose connect timeout is doctor's, whatever
    the URL says (the gateway's own connect waits longer)."""
    timeout = max(_MIN_CONNECT_TIMEOUT, math.ceil(timeout_secs))
    return psycopg.connect(
        url, autocommit=True, connect_timeout=timeout, application_name="picobot doctor"
    )


def _failed_outbox(conn: PgConnection) -> int:
    try:
        counts = unsent_counts(conn)  # type: ignore[arg-type]  # the sqlite3 subset
    except (DatabaseError, StorageUnavailable):  # no outbox table (a partial schema)
        return 0
    return counts.get(OutboxState.FAILED.value, 0)


def _reason(exc: BaseException, url: str) -> str:
    """The driver's first line, with the URL's password masked should the
    driver ever quote it."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    for secret in _passwords_of(url):
        line = line.replace(secret, "***")
    return line


def _passwords_of(url: str) -> set[str]:
    """The password as written in `url` and decoded, from the user info or a
    `password=` query value."""
    try:
        parts = urlsplit(url)
        found = {parts.password or ""}
    except ValueError:
        return set()
    found |= {v for k, v in parse_qsl(parts.query) if k.lower() == "password"}
    return {p for each in found for p in (each, unquote(each)) if p}
