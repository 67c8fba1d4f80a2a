"""The start-up floor: what any gateway built on picobot's libraries pays
before it can answer /ready, with none of picobot's own code.

`python -m bench.ready_floor` imports the third-party libraries the gateway
loads before it is ready (LIBRARIES), defines one pydantic model, sets up
structlog's JSON lines, opens an SQLite database, serves /ready with
aiohttp on 127.0.0.1 port 0 and prints the port. bench.startup starts it as
it starts the gateway, so that the start-up it reports splits into this
floor and what picobot adds; the floor follows the machine's speed and the
libraries' versions, not picobot's code.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sqlite3
import sys
import tempfile
from pathlib import Path

# picobot's own dependencies that the gateway imports before /ready (their
# dependencies follow); tests/test_bench.py checks it against the gateway's
LIBRARIES = (
    "aiohttp.web",
    "aiosqlite",
    "croniter",
    "orjson",
    "prometheus_client",
    "pydantic",
    "structlog",
    "yaml",
)


async def serve() -> None:
    # as the gateway does (gateway.cli.program): structlog without rich
    sys.modules["rich"] = None  # type: ignore[assignment]
    importlib.import_module("structlog")
    del sys.modules["rich"]
    for name in LIBRARIES:
        importlib.import_module(name)
    import structlog
    from aiohttp import web
    from pydantic import BaseModel

    class Settings(BaseModel):
        host: str = "127.0.0.1"
        port: int = 0

    settings = Settings.model_validate({})
    structlog.configure(processors=[structlog.processors.JSONRenderer()])
    with tempfile.TemporaryDirectory(prefix="picobot-floor-") as tmp:
        db = sqlite3.connect(Path(tmp) / "floor.db")
        db.execute("PRAGMA journal_mode=WAL")

        async def ready(_: web.Request) -> web.Response:
            return web.Response(text="ready")

        app = web.Application()
        app.router.add_get("/ready", ready)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        port = runner.addresses[0][1]
        stop = asyncio.Event()  # the bench terminates it: clean up, temporary directory too
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print(port, flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
            db.close()


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        sys.exit(0)
