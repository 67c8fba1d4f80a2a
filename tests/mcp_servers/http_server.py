"""A streamable-HTTP MCP server (FastMCP) for tests.

`python http_server.py --port N --token T`: serves /mcp on 127.0.0.1:N (0 picks
a port) and prints `PORT <n>` once it listens. Every request must carry
`Authorization: Bearer T`, else 401. Tools: `echo`, `crash` (the process
exits mid-call).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

import uvicorn
from common_tools import add_common_tools  # this folder: the script runs as a file
from mcp.server.fastmcp import FastMCP

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--token", required=True)
options = parser.parse_args()

server = FastMCP("search", host="127.0.0.1", log_level="WARNING")


add_common_tools(server)


def guarded(app: Any, token: str) -> Any:
    expected = f"Bearer {token}".encode()

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"bad token"})
            return
        await app(scope, receive, send)

    return asgi


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    app = guarded(server.streamable_http_app(), options.token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await http.serve(sockets=[sock])


asyncio.run(main())
sys.exit(0)
