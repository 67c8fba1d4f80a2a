"""The storage/sql/ functions' connection, on PostgreSQL.

`storage/sql/` is written against the subset of sqlite3's connection named
in storage.database (`execute`, `executemany`, `?` placeholders, rows by
index and by name, `row_factory`, `rowcount`, `in_transaction`). Here a
psycopg connection (autocommit; the writer sends BEGIN and COMMIT itself)
offers the same:

- SQL is rewritten once per distinct text (cached): `?` -> `%s`, `:name`
  -> `%(name)s`, a literal `%` -> `%%`, `IS NOT ?` -> `IS DISTINCT FROM`,
  `BEGIN IMMEDIATE` -> `BEGIN`, SQLite's `INDEXED BY` hints dropped; nothing inside quotes is touched. What the
  two engines spell differently beyond that is branched on `is_postgres`
  in storage/sql/ itself (storage/sql/dialect.py).
- A Python bool is bound as 0/1, as SQLite stores it (the schema's flags are
  integers on both).
- Driver errors leave as the project's: a lost connection, a server shutting
  down, a full disk, a serialisation conflict or a lock timeout as
  `StorageUnavailable` (retry once writes pass); a refused constraint as
  `storage.errors.IntegrityError`; anything else as `DatabaseError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import psycopg
from psycopg import errors, pq
from psycopg.adapt import Dumper
from psycopg.rows import tuple_row

from storage.errors import DatabaseError, IntegrityError, StorageUnavailable

__all__ = ["PgConnection", "PgCursor", "Row", "translate"]

Params = Sequence[Any] | Mapping[str, Any]

# what the writer and the backup send as they are
_VERBATIM: Final = {"BEGIN IMMEDIATE": "BEGIN"}
# a quoted literal or identifier, a `?`, a `:name` (not a `::` cast), a `%`,
# `IS NOT ?`, an `INDEXED BY` hint, `julianday(` and `GLOB 'prefix*'`
_TOKEN: Final = re.compile(
    r"(?P<glob>\bGLOB\s+'(?P<prefix>[^'*?\[\]%_]*)\*')"
    r"|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(?P<isnot>\bIS\s+NOT\s+\?)|(?P<q>\?)"
    r"|(?P<hint>\s+INDEXED\s+BY\s+\w+)|(?P<jd>\bjulianday\((?P<arg>[^()]*)\))"
    r"|(?<!:):(?P<name>[A-Za-z_]\w*)|(?P<pct>%)",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """`sql` as written for sqlite3, in psycopg's placeholders."""
    if sql in _VERBATIM:
        return _VERBATIM[sql]

    def swap(m: re.Match[str]) -> str:
        if m["isnot"]:
            return "IS DISTINCT FROM %s"
        if m["q"]:
            return "%s"
        if m["name"]:
            return f"%({m['name']})s"
        if m["pct"]:
            return "%%"
        if m["hint"]:
            return ""  # SQLite's index hint; PostgreSQL's planner picks its own
        if m["jd"]:  # only ever compared: as instants, whatever the offsets
            return f"CAST({translate(m['arg'])} AS timestamptz)"
        if m["glob"]:
            return f"LIKE '{m['prefix']}%%'"
        return m[0].replace("%", "%%")  # a quoted literal: psycopg reads `%` there too

    return _TOKEN.sub(swap, sql)


class Row:
    """A row by index and by column name, like sqlite3.Row."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: tuple[Any, ...], index: Mapping[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str | slice) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return self._values == other._values
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values)

    def keys(self) -> list[str]:
        return list(self._index)

    def __repr__(self) -> str:
        return f"Row({self._values!r})"


class PgCursor:
    """The part of sqlite3.Cursor that storage/sql/ uses. `row_factory = None`
    gives plain tuples from then on, as on sqlite3."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._raw = conn.cursor(row_factory=tuple_row)
        self.row_factory: object | None = Row
        self._index: dict[str, int] = {}

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        _guarded(self._raw.execute, translate(sql), params)  # () too: `%%` is read as `%`
        self._described()
        return self

    def executemany(self, sql: str, seq: Iterable[Params]) -> PgCursor:
        _guarded(self._raw.executemany, translate(sql), list(seq))
        self._described()
        return self

    def _described(self) -> None:
        description = self._raw.description
        self._index = {c.name: i for i, c in enumerate(description)} if description else {}

    def close(self) -> None:
        self._raw.close()

    @property
    def rowcount(self) -> int:
        return self._raw.rowcount

    @property
    def description(self) -> Any:
        return self._raw.description

    def _wrap(self, values: tuple[Any, ...]) -> Any:
        return values if self.row_factory is None else Row(values, self._index)

    def fetchone(self) -> Any:
        values = _guarded(self._raw.fetchone)
        return None if values is None else self._wrap(values)

    def fetchall(self) -> list[Any]:
        rows: list[tuple[Any, ...]] = _guarded(self._raw.fetchall)
        if self.row_factory is None:
            return list(rows)
        return [Row(values, self._index) for values in rows]

    def fetchmany(self, size: int) -> list[Any]:
        return [self._wrap(v) for v in _guarded(self._raw.fetchmany, size)]

    def __iter__(self) -> Iterator[Any]:
        while (row := self.fetchone()) is not None:
            yield row


class PgConnection:
    """A psycopg connection dressed as the sqlite3 one storage/sql/ expects."""

    is_postgres: Final = True

    def __init__(self, raw: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.raw = raw
        raw.adapters.register_dumper(bool, _BoolAsInt)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def cursor(self) -> PgCursor:
        return PgCursor(self.raw)

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        return PgCursor(self.raw).execute(sql, params)

    def executemany(self, sql: str, seq: Iterable[Params]) -> PgCursor:
        return PgCursor(self.raw).executemany(sql, seq)

    def close(self) -> None:
        self.raw.close()


class _BoolAsInt(Dumper):
    """True/False as 1/0: the flag columns are integers, as on SQLite."""

    oid = 20  # int8

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


def _guarded(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except psycopg.Error as exc:
        raise as_storage_error(exc) from exc


def as_storage_error(exc: psycopg.Error) -> Exception:
    """The project's exception for a driver error (see the module docstring)."""
    if isinstance(exc, psycopg.IntegrityError):
        return IntegrityError(str(exc))
    if isinstance(
        exc, psycopg.OperationalError | psycopg.InterfaceError | errors.ReadOnlySqlTransaction
    ):
        # class 08 (connection), 40 (serialisation, deadlock), 53 (resources:
        # disk full, too many connections), 55 (lock not available), 57
        # (shutdown, cancel), 58 (system I/O), a standby that took our URL:
        # the server's state, not the SQL
        return StorageUnavailable(_first_line(exc))
    return DatabaseError(_first_line(exc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
