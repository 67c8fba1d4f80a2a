"""Starting the test MCP servers: stdio configs, and the HTTP server as a child
process that a test can kill (SIGKILL) and start again on the same port."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any, Self

__all__ = ["FS_SERVER", "HttpMcpServer", "free_port", "stdio_server"]

FS_SERVER = Path(__file__).with_name("fs_server.py")
HTTP_SERVER = Path(__file__).with_name("http_server.py")


def stdio_server(*args: str, **keys: Any) -> dict[str, Any]:
    """An `mcpServers` entry running fs_server.py with `args`."""
    return {"type": "stdio", "command": sys.executable, "args": [str(FS_SERVER), *args], **keys}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpMcpServer:
    def __init__(self, token: str, port: int = 0) -> None:
        self.token = token
        self.port = port
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def entry(self, **keys: Any) -> dict[str, Any]:
        """An `mcpServers` entry for this server (headers as given in `keys`)."""
        return {"type": "streamableHttp", "baseUrl": self.url, **keys}

    async def start(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HTTP_SERVER),
            "--port",
            str(self.port),
            "--token",
            self.token,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line.startswith(b"PORT "):
            proc.kill()
            await proc.communicate()
            raise RuntimeError(f"MCP HTTP server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.proc = proc

    async def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
            await proc.communicate()  # reads stdout to its end, so its pipe is closed

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.kill()
