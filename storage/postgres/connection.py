"""The storage/sql/ functions' connection, on PostgreSQL.

`storage/sql/` is written against the subset of sqlite3's connection named
in storage.database (`execute`, `executemany`, `?` placeholders, rows by
index and by name, `row_factory`, `rowcount`, `in_transaction`). Here a
psycopg connection (autocommit; the writer sends BEGIN and COMMIT itself)
offers the same, through libpq directly (`PgConnection`):

- SQL is rewritten once per distinct text (cached): `translate` gives
  psycopg's placeholders (`?` -> `%s`, `:name` -> `%(name)s`, a literal `%`
  -> `%%`, `IS NOT ?` -> `IS DISTINCT FROM`, `BEGIN IMMEDIATE` -> `BEGIN`,
  SQLite's `INDEXED BY` hints dropped, `julianday` comparisons and `GLOB`
  prefixes in PostgreSQL's terms; nothing inside quotes is touched), and
  `numbered` libpq's `$1, $2, …` from that. What the two engines spell
  differently beyond that is branched on `is_postgres` in storage/sql/
  itself (storage/sql/dialect.py).
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
import psycopg.abc
from psycopg import errors, pq
from psycopg.adapt import Dumper, PyFormat, Transformer

from storage.errors import DatabaseError, IntegrityError, StorageUnavailable

__all__ = ["PgConnection", "PgCursor", "Row", "numbered", "translate"]

Params = Sequence[Any] | Mapping[str, Any]

# transaction control the writer sends (storage.database), as libpq takes it
_CONTROL: Final = {
    sql: sql.encode()
    for sql in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT job", "RELEASE SAVEPOINT job",
                "ROLLBACK TO SAVEPOINT job")
} | {"BEGIN IMMEDIATE": b"BEGIN"}  # fmt: skip
_PREPARED_MAX: Final = 1024  # statements prepared (and columns remembered) per connection
_PLACEHOLDER: Final = re.compile(r"%%|%\((?P<name>\w+)\)s|%s")

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


@functools.lru_cache(maxsize=4096)
def numbered(sql: str) -> tuple[bytes, tuple[str, ...] | None, int]:
    """`translate(sql)` as libpq takes it: `$1, $2, …` for the placeholders
    (a name used twice is one number), `%%` back to `%`. Returns the query,
    the parameter names in number order (None when positional) and how many."""
    names: dict[str, int] = {}
    count = 0

    def number(m: re.Match[str]) -> str:
        nonlocal count
        if m[0] == "%%":
            return "%"
        if m["name"] is None:
            count += 1
            return f"${count}"
        if m["name"] not in names:
            names[m["name"]] = len(names) + 1
        return f"${names[m['name']]}"

    query = _PLACEHOLDER.sub(number, translate(sql))
    if names and count:
        raise ValueError(f"both ? and :name placeholders in {sql!r}")
    return query.encode(), (tuple(names) if names else None), (len(names) or count)


class PgCursor:
    """The part of sqlite3.Cursor that storage/sql/ uses. `row_factory = None`
    gives plain tuples from then on, as on sqlite3. Each result is the
    server's answer held whole (as psycopg's client-side cursors hold it),
    turned into Python values as it is read."""

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn
        self._rows: psycopg.abc.Transformer | None = None  # the result being read, if it has rows
        self._next = self._end = 0
        self._index: dict[str, int] = {}
        self.row_factory: object | None = Row
        self.rowcount = -1

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        result = self._conn.run(sql, params)
        tuples = result.command_tuples
        self.rowcount = -1 if tuples is None else tuples
        if result.status == pq.ExecStatus.TUPLES_OK:
            rows = Transformer(self._conn.raw)
            rows.set_pgresult(result)
            self._rows, self._next, self._end = rows, 0, result.ntuples
            self._index = self._conn.columns_of(sql, result)
        else:
            self._rows, self._next, self._end, self._index = None, 0, 0, {}
        return self

    def executemany(self, sql: str, seq: Iterable[Params]) -> PgCursor:
        total = 0
        for params in seq:
            total += max(0, self.execute(sql, params).rowcount)
        self._rows, self._next, self._end, self.rowcount = None, 0, 0, total
        return self

    def close(self) -> None:
        self._rows, self._next, self._end = None, 0, 0

    def _take(self, count: int) -> list[tuple[Any, ...]]:
        if self._rows is None:
            return []
        stop = min(self._end, self._next + count)
        values: list[tuple[Any, ...]] = _guarded(self._rows.load_rows, self._next, stop, tuple)
        self._next = stop
        return values

    def _wrap(self, values: tuple[Any, ...]) -> Any:
        return values if self.row_factory is None else Row(values, self._index)

    def fetchone(self) -> Any:
        values = self._take(1)
        return self._wrap(values[0]) if values else None

    def fetchall(self) -> list[Any]:
        rows = self._take(self._end)
        if self.row_factory is None:
            return rows
        return [Row(values, self._index) for values in rows]

    def fetchmany(self, size: int) -> list[Any]:
        return [self._wrap(values) for values in self._take(size)]

    def __iter__(self) -> Iterator[Any]:
        while (row := self.fetchone()) is not None:
            yield row


class PgConnection:
    """A psycopg connection dressed as the sqlite3 one storage/sql/ expects.

    Statements go to libpq directly (`pgconn.exec_params`, `exec_prepared`,
    the GIL released while the server answers) with psycopg's own adapters
    for the values both ways: a third of the CPU of psycopg's cursor for the
    same round trip, and storage/sql/ makes some ten per message. A
    statement run twice is prepared (once per connection), as psycopg does."""

    is_postgres: Final = True

    def __init__(self, raw: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.raw = raw
        raw.adapters.register_dumper(bool, _BoolAsInt)
        self._params = Transformer(raw)
        self._seen: dict[tuple[bytes, tuple[int, ...]], int] = {}  # runs so far, unprepared
        self._prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}  # -> statement name
        self._columns: dict[str, dict[str, int]] = {}  # by statement: names -> index

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def cursor(self) -> PgCursor:
        return PgCursor(self)

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        return PgCursor(self).execute(sql, params)

    def executemany(self, sql: str, seq: Iterable[Params]) -> PgCursor:
        return PgCursor(self).executemany(sql, seq)

    def run(self, sql: str, params: Params) -> pq.abc.PGresult:
        """One statement's result, or the project's error for it."""
        pgconn = self.raw.pgconn
        if not params and sql in _CONTROL:  # BEGIN, COMMIT, savepoints: no parameters to bind
            return self._checked(_guarded(pgconn.exec_, _CONTROL[sql]))
        query, names, count = numbered(sql)
        values = _ordered(params, names)
        if len(values) != count:
            raise DatabaseError(f"the statement takes {count} parameters, {len(values)} given")
        dumped = _guarded(self._params.dump_sequence, values, [PyFormat.AUTO] * count)
        types, formats = self._params.types or (), self._params.formats
        key = (query, types)
        name = self._prepared.get(key)
        if name is None and self._seen.get(key, 0) >= 1 and len(self._prepared) < _PREPARED_MAX:
            name = f"picobot_{len(self._prepared)}".encode()
            self._checked(_guarded(pgconn.prepare, name, query, types))
            self._prepared[key] = name
            self._seen.pop(key, None)
        if name is not None:
            return self._checked(_guarded(pgconn.exec_prepared, name, dumped, formats))
        if len(self._seen) < _PREPARED_MAX:
            self._seen[key] = self._seen.get(key, 0) + 1
        return self._checked(_guarded(pgconn.exec_params, query, dumped, types, formats))

    def _checked(self, result: pq.abc.PGresult) -> pq.abc.PGresult:
        if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            return result
        pgconn = self.raw.pgconn
        if pgconn.status == pq.ConnStatus.BAD:  # the connection is gone
            message = result.get_error_message() or pgconn.get_error_message()
            raise StorageUnavailable(_first_line(psycopg.OperationalError(message)))
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise as_storage_error(errors.error_from_result(result, self.raw.info.encoding))
        raise DatabaseError(
            f"unexpected result from the server: {pq.ExecStatus(result.status).name}"
        )

    def columns_of(self, sql: str, result: pq.abc.PGresult) -> dict[str, int]:
        """Column name -> index of `sql`'s rows (the same every time it runs)."""
        index = self._columns.get(sql)
        if index is None:
            encoding = self.raw.info.encoding
            index = {(result.fname(i) or b"").decode(encoding): i for i in range(result.nfields)}
            if len(self._columns) < _PREPARED_MAX:
                self._columns[sql] = index
        return index

    def close(self) -> None:
        self.raw.close()


def _ordered(params: Params, names: tuple[str, ...] | None) -> Sequence[Any]:
    if names is None:
        if isinstance(params, Mapping):
            raise DatabaseError("named parameters given to a statement with ? placeholders")
        return params
    if not isinstance(params, Mapping):
        raise DatabaseError("positional parameters given to a statement with :name placeholders")
    try:
        return [params[name] for name in names]
    except KeyError as exc:
        raise DatabaseError(f"no value for the parameter :{exc.args[0]}") from exc


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
