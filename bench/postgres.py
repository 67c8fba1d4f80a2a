"""A throwaway PostgreSQL server for the bench (issue 53), and its CPU.

The cluster is tests/pgcluster.py's (the tests' own), started durable: it
keeps PostgreSQL's default durability (fsync on, synchronous_commit on), since
the bench compares durable turns and each commit waits for its WAL flush.

`PostgresCpu` reads the server's CPU from /proc: the postmaster and its
children alive now, plus what the postmaster has collected from children that
exited (backends of closed connections), so a run's figure holds all of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.pgcluster import PostgresServer, find_bindir, running_cluster

__all__ = ["NOT_INSTALLED", "PostgresCpu", "PostgresServer", "find_bindir", "postgres_server"]

NOT_INSTALLED = "skipped: PostgreSQL not installed"
DURABILITY = "fsync on, synchronous_commit on (PostgreSQL defaults: every commit flushed)"
_TICK = os.sysconf("SC_CLK_TCK")


@contextmanager
def postgres_server(bindir: Path) -> Iterator[PostgresServer]:
    """A started durable cluster, stopped and deleted on the way out."""
    with running_cluster(bindir, durable=True, name_prefix="bench") as server:
        yield server


# --- the server's CPU -------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (which may hold spaces)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2 :].split()


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent` (PostgreSQL does not use threads)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat_fields(int(entry))[1]) == parent:
                    out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return out


def _live_secs(pid: int) -> float:
    """A live process's CPU: the scheduler's nanoseconds where kept, else its ticks."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            nanos = int(f.read().split()[0])
        if nanos:
            return nanos / 1e9
    except (OSError, ValueError, IndexError):
        pass
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _TICK


def server_cpu(postmaster: int) -> dict[int, float]:
    """CPU seconds so far of the postmaster and each live child, by pid; the key
    0 holds what the postmaster collected from its children that exited."""
    fields = _stat_fields(postmaster)
    out = {0: (int(fields[13]) + int(fields[14])) / _TICK}  # cutime + cstime
    for pid in [postmaster, *_children(postmaster)]:
        try:
            out[pid] = _live_secs(pid)
        except (OSError, ValueError, IndexError):
            continue
    return out


@dataclass
class PostgresCpu:
    """The server's CPU between `start` and `stop`. A child that exited in
    between moves from "live" to "collected" (in ticks): its CPU before
    `start` is subtracted once, from the collected part."""

    postmaster: int
    before: dict[int, float] = field(default_factory=dict)

    def start(self) -> None:
        self.before = server_cpu(self.postmaster)

    def stop(self, per: int) -> float:
        """ms of server CPU per one of `per` units of work."""
        after = server_cpu(self.postmaster)
        used = after[0] - self.before[0]
        for pid, secs in after.items():
            if pid:
                used += secs - self.before.get(pid, 0.0)
        used -= sum(secs for pid, secs in self.before.items() if pid and pid not in after)
        return round(max(0.0, used) * 1000 / max(1, per), 3)
