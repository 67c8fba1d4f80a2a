"""A stdio MCP server (FastMCP) for tests: `python fs_server.py [--pid-file F] [--gate FIFO]`.

Tools: `echo` (returns its text), `crash` (the process exits mid-call), `grow`
(adds a `shout` tool and sends notifications/tools/list_changed), `quit`
(answers, then exits while idle), `fail`
(an isError result), `picture` (an image block), `hang` (writes `started
<request id>` to a file, then waits; on notifications/cancelled it writes
`cancelled <request id>`), `batch_job` (listed as task-only:
execution.taskSupport "required"). `--gate FIFO` makes the
server wait, before it answers anything, until a line can be read from FIFO:
a server that is still initialising for as long as the test wants.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path

import anyio
from common_tools import add_common_tools  # this folder: the script runs as a file
from mcp import types
from mcp.server.fastmcp import Context, FastMCP, Image

parser = argparse.ArgumentParser()
parser.add_argument("--pid-file")
parser.add_argument("--gate")
options = parser.parse_args()
if options.pid_file:
    Path(options.pid_file).write_text(str(os.getpid()))
if options.gate:
    with open(options.gate) as gate:  # blocks until the test opens the FIFO for writing
        gate.readline()

server = FastMCP("fs", log_level="WARNING")


add_common_tools(server)


@server.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add the `shout` tool and tell the client the tool list changed."""

    def shout(text: str) -> str:
        """Return the text in capitals."""
        return text.upper()

    server.add_tool(shout)
    await ctx.session.send_tool_list_changed()
    return "added shout"


@server.tool()
def quit() -> str:
    """Answer, then exit while idle a moment later."""
    threading.Timer(0.2, os._exit, args=(4,)).start()
    return "bye"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the disk is on fire")


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 24, format="png")


@server.tool()
async def hang(path: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Wait until cancelled, noting the request id at the start and on cancellation."""
    record = Path(path)
    record.write_text(f"started {ctx.request_id}\n")
    try:
        await anyio.Event().wait()  # set by nobody: until cancelled
    except anyio.get_cancelled_exc_class():
        with record.open("a") as out:
            out.write(f"cancelled {ctx.request_id}\n")
        raise
    return "woke up"


@server.tool()
def batch_job() -> str:
    """A job the server runs only as a task."""
    return "done"


async def _list_tools() -> list[types.Tool]:
    """FastMCP's list, with `batch_job` marked task-only (FastMCP has no switch for it)."""
    required = types.ToolExecution(taskSupport=types.TASK_REQUIRED)
    return [
        t.model_copy(update={"execution": required}) if t.name == "batch_job" else t
        for t in await server.list_tools()
    ]


server._mcp_server.list_tools()(_list_tools)


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of this process, or `(unset)`."""
    return os.environ.get(name, "(unset)")


server.run()
