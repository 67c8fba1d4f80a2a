"""The `picobot` operator CLI: run the gateway, chat from a terminal, look after an install.

`program` holds the argument parser and `main`; each other module is one
subcommand family (`jobs`, `outbox`, `doctor`, `init`, `backup`/`restore`, the
terminal `client`). The CLI may import any layer; the runtime never imports
the CLI. It never touches SQLite itself: database work is a `storage` function.
"""

from __future__ import annotations

from gateway.cli.program import main

__all__ = ["main"]
