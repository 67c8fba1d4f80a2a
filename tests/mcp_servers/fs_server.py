"""A stdio MCP server (FastMCP) for tests: `python fs_server.py [--pid-file F] [--gate FIFO]`.

Tools: `echo` (returns its text), `crash` (the process exits mid-call), `grow`
(adds a `shout` tool and sends notifications/tools/list_changed), `quit`
(answers, then exits while idle), `fail`
(an isError result), `picture` (an image block). `--gate FIFO` makes the
server wait, before it answers anything, until a line can be read from FIFO:
a server that is still initialising for as long as the test wants.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path

from common_tools import add_common_tools  # this folder: the script runs as a file
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
def env(name: str) -> str:
    """The value of an environment variable of this process, or `(unset)`."""
    return os.environ.get(name, "(unset)")


server.run()
