"""`picobot doctor`: check an installation and say what to fix.

Offline checks (gateway.ops.doctor.checks, which the console's Configuration
view runs too): the config (the same `ConfigError` text start-up prints, plus
which `${VAR}` placeholders are unset), the database (a SQLite file: schema
version, integrity; a PostgreSQL server: reachable within a short timeout,
its version, the schema version), the data, storage, workspace and media
directories (writable, by really creating a file), each enabled channel's
credentials and access settings (pairing with no admin to approve codes) and
each used provider's api_key. With `--probe` it also calls each provider and
channel API once with a short timeout (gateway.ops.doctor.probe).

Doctor never changes anything: the database is opened read-only (never
created or migrated — that is start-up's job) and no secret is ever printed
(a storage.url shows its password as ***).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

from gateway.config.core import ConfigError
from gateway.config.loading import (
    find_config_file,
    load_config,
    picobot_home,
    unset_placeholders_in_use,
)
from gateway.ops.doctor.checks import check_dirs, offline_findings
from gateway.ops.doctor.findings import Finding, Status, problem, warn
from gateway.ops.doctor.probe import probe_all

__all__ = ["Finding", "Status", "run_doctor"]  # Finding, Status: from gateway.ops.doctor


async def run_doctor(
    config_path: str | None,
    environ: Mapping[str, str],
    *,
    probe: bool,
    out: TextIO,
    cwd: Path | None = None,
    probe_timeout_secs: float = 5.0,
) -> int:
    """Print one line per check; 0 when nothing is a problem, 1 otherwise."""
    problems = warnings = 0

    def report(findings: Iterable[Finding]) -> None:
        nonlocal problems, warnings
        for finding in findings:
            problems += finding.status is Status.PROBLEM
            warnings += finding.status is Status.WARN
            print(finding.render(), file=out)

    try:
        loaded = load_config(config_path, environ, cwd)
    except ConfigError as exc:
        report([problem("config", str(exc), "fix the file; every key is in docs/CONFIG.md")])
        report(_unset_placeholders(config_path, environ, cwd or Path.cwd()))
        report(await asyncio.to_thread(check_dirs, [("data dir", picobot_home(environ))]))
        _summary(problems, warnings, out)
        return 1
    report(await asyncio.to_thread(offline_findings, loaded))
    if probe:
        report(await probe_all(loaded, probe_timeout_secs))
    _summary(problems, warnings, out)
    return 1 if problems else 0


def _summary(problems: int, warnings: int, out: TextIO) -> None:
    text = f"{problems} problem(s) found" if problems else "no problems found"
    print(f"{text}, {warnings} warning(s)" if warnings else text, file=out)


def _unset_placeholders(
    config_path: str | None, environ: Mapping[str, str], cwd: Path
) -> list[Finding]:
    """After a failed load: unset placeholders often explain it (those of a
    disabled channel or an inactive MCP server do not)."""
    try:
        path = find_config_file(config_path, environ, cwd)
        raw = json.loads(path.read_text(encoding="utf-8")) if path else {}
    except (ConfigError, OSError, ValueError, RecursionError):  # the load said why already
        return []
    names = set(unset_placeholders_in_use(raw, environ).values())
    return [
        warn("config", f"${{{name}}} is not set in the environment", f"export {name}=…")
        for name in sorted(names)
    ]
