"""`picobot storage copy --to URL [--from URL]`: move a home between backends.

The copy itself is `storage.copy.copy_storage` (one snapshot of the source,
one transaction on the target, counts verified); this module prints what it
did and turns a refusal into exit code 1 with a one-line reason. URLs are
printed without their password. Only argparse is imported at the top:
`picobot --help` builds this parser.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

__all__ = ["add_copy_arguments", "run_storage_copy"]


def add_copy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to",
        dest="target",
        required=True,
        help="the new, empty database: postgresql://user@host/db or sqlite:///path",
    )
    parser.add_argument(
        "--from",
        dest="source",
        help="the database to copy (default: the configured storage.url)",
    )


async def run_storage_copy(source_url: str, target_url: str, *, out: TextIO | None = None) -> int:
    """Copy every table of `source_url` into the empty `target_url`; 0 on success."""
    from storage.copy import CopyError, copy_storage, describe
    from storage.errors import SchemaTooNew, StorageUnavailable, StorageUnusable

    stream = sys.stdout if out is None else out
    try:
        report = await copy_storage(source_url, target_url)
    except (CopyError, SchemaTooNew, StorageUnusable, StorageUnavailable, ValueError) as exc:
        print(f"copy refused: {_one_line(exc)}", file=stream)
        return 1
    for table, count in report.counts.items():
        print(f"  {table}: {count} rows", file=stream)
    print(
        f"copied {report.total} rows from {describe(source_url)} to {describe(target_url)}",
        file=stream,
    )
    print(
        "set storage.url to the target, then start the gateway "
        "(writes made to the source after the copy are not in it)",
        file=stream,
    )
    return 0


def _one_line(exc: BaseException) -> str:
    from storage.url import redact_url

    text = " ".join(str(exc).split()) or type(exc).__name__
    # driver messages can quote the URL they were given: never its password
    for word in text.split():
        if "://" in word:
            text = text.replace(word, redact_url(word))
    return text
