"""The storage contract suite runs on every backend (issue 53).

A test that asks for `storage_url`, `database` or `open_storage` runs once per
backend, `backend` = "sqlite" and "postgres" (the latter marked `postgres`:
skipped with a summary line without PostgreSQL, an error under CI), so one
suite, not a copy per backend, says what `storage.database.Database` promises.
Tests about SQLite itself (its file, PRAGMAs, the WAL) ask for none of these
and keep opening `storage.sqlite.db.Database` directly.

The URL and the throwaway cluster come from tests/postgres.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import pytest

from storage.backends import open_database
from storage.database import Database

__all__ = [
    "BACKEND_FIXTURES",
    "OpenStorage",
    "database",
    "open_storage",
    "parametrize_backend",
]

# what `open_storage` is: a database on the backend under test, not yet opened
OpenStorage = Callable[..., Database]

# the fixtures that make a test run once per backend
BACKEND_FIXTURES: Final = frozenset({"storage_url", "database", "open_storage"})
BACKENDS: Final = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def parametrize_backend(metafunc: pytest.Metafunc) -> None:
    """Run the test once per backend when it reaches storage through our fixtures
    (unless it parametrises `backend` itself)."""
    names = set(metafunc.fixturenames)
    if BACKEND_FIXTURES & names and not _parametrized(metafunc, "backend"):
        metafunc.parametrize("backend", BACKENDS)


def _parametrized(metafunc: pytest.Metafunc, name: str) -> bool:
    """Whether a `parametrize` mark names `name` (as `storage_backends` does)."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if name in names:
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_backend(metafunc)


@pytest.fixture
def open_storage(storage_url: str) -> OpenStorage:
    """A factory of databases on the same URL, not yet opened: for tests that
    close and reopen, or open a second one beside the first (another process)."""

    def make(**options: Any) -> Database:
        return open_database(storage_url, **options)

    return make


@pytest.fixture
async def database(open_storage: OpenStorage) -> AsyncIterator[Database]:
    """An opened database on the backend under test, closed afterwards."""
    async with open_storage() as opened:
        yield opened
