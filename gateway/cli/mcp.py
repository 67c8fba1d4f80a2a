"""`picobot mcp list|tools|call`: the configured MCP servers, seen from this machine.

Each command connects to the servers itself, exactly as the gateway would
(same config, same SDK, same tool names and filters), whether or not a
gateway is running — so an operator can check a server's command, URL and
token, see the names the model gets, and call a tool by hand. A running
gateway's own view of its servers is in its `/ready` body.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TextIO

from agent.mcp.config import McpServerConfig
from agent.mcp.naming import tool_name
from gateway.config.loading import LoadedConfig
from gateway.ops.logging import register_secrets
from gateway.tools.mcp import secret_values

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager

__all__ = ["add_mcp_parser", "run_mcp_command"]


def add_mcp_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    parser = subparsers.add_parser("mcp", help="check and call the configured MCP servers")
    commands = parser.add_subparsers(dest="mcp_command", required=True, metavar="COMMAND")
    listing = with_config(commands.add_parser("list", help="each server: connects, tool count"))
    tools = with_config(commands.add_parser("tools", help="the tools the model gets"))
    tools.add_argument("server", nargs="?", help="only this server (its key)")
    call = with_config(commands.add_parser("call", help="call a tool by its mcp_* name"))
    call.add_argument("tool", help="e.g. mcp_fs_read_file")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object (default {})")
    for sub in (listing, tools, call):
        sub.add_argument(
            "--timeout", type=float, default=30.0, help="seconds to wait for servers (default 30)"
        )
    for sub in (listing, tools):
        sub.add_argument("--json", action="store_true", help="print JSON")


async def run_mcp_command(
    args: argparse.Namespace, loaded: LoadedConfig, out: TextIO = sys.stdout
) -> int:
    servers = loaded.config.mcp_servers
    register_secrets(secret_values(servers))
    command: str = args.mcp_command
    if command == "call":
        return await _call(args, loaded, out)
    chosen = dict(servers)
    if command == "tools" and args.server is not None:
        if args.server not in servers:
            print(f"picobot: no MCP server {args.server!r} in mcpServers", file=sys.stderr)
            return 2
        chosen = {args.server: servers[args.server]}
    if not chosen:
        print("no MCP servers configured (mcpServers)", file=out)
        return 0
    async with _connected(chosen, loaded.config.tools.disabled, args.timeout) as manager:
        if command == "list":
            return _print_list(chosen, manager, args.json, out)
        return _print_tools(manager, args.json, out)


@asynccontextmanager
async def _connected(
    servers: Mapping[str, McpServerConfig], disabled: list[str], wait_secs: float
) -> AsyncIterator[McpManager]:
    """The servers started and given `wait_secs` to connect (or to fail once)."""
    from agent.mcp.manager import McpManager
    from agent.mcp.server import ServerState

    manager = McpManager(servers, disabled=disabled)
    settled = (ServerState.UP, ServerState.DOWN)
    async with asyncio.TaskGroup() as tg:
        await manager.start(tg)
        try:
            with contextlib.suppress(TimeoutError):  # those still connecting show as such
                async with asyncio.timeout(wait_secs):
                    await manager.wait_until(
                        lambda: all(s.state in settled for s in manager.servers.values())
                    )
            yield manager
        finally:
            await manager.stop()


def _print_list(
    servers: Mapping[str, McpServerConfig], manager: McpManager, as_json: bool, out: TextIO
) -> int:
    statuses = {s.key: s for s in manager.statuses()}
    rows: dict[str, dict[str, object]] = {}
    for key, config in servers.items():
        status = statuses.get(key)
        if status is None:
            rows[key] = {"name": config.name or key, "state": "inactive"}
        else:
            rows[key] = status.to_dict()
            rows[key].pop("retry_in_secs", None)
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False), file=out)
    else:
        print(f"{'SERVER':16} {'TRANSPORT':9} {'STATE':10} {'TOOLS':>5}  DETAIL", file=out)
        for key, row in rows.items():
            transport = row.get("transport", servers[key].transport)
            tools = row.get("tools", "-")
            detail = row.get("error", "")
            print(f"{key:16} {transport!s:9} {row['state']!s:10} {tools!s:>5}  {detail}", file=out)
    return 0 if all(row["state"] in ("up", "inactive") for row in rows.values()) else 1


def _print_tools(manager: McpManager, as_json: bool, out: TextIO) -> int:
    specs = manager.specs()
    if as_json:
        listed: list[dict[str, object]] = [
            {"name": s.name, "description": s.description, "parameters": s.parameters}
            for s in specs
        ]
        listed += [{"name": n, "offered": False, "why": why} for n, why in manager.left_out()]
        print(json.dumps(listed, indent=2, ensure_ascii=False), file=out)
    else:
        for spec in specs:
            print(f"{spec.name}  {spec.description}", file=out)
        for name, why in manager.left_out():
            print(f"{name}  (not offered: {why})", file=out)
    down = manager.unavailable()
    if down:
        print(f"not connected (no tools listed): {', '.join(down)}", file=sys.stderr)
    return 1 if down else 0


async def _call(args: argparse.Namespace, loaded: LoadedConfig, out: TextIO) -> int:
    from agent.tools.base import ToolContext, ToolError, ToolSettings

    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        print(f"picobot: arguments are not valid JSON: {exc.msg}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("picobot: arguments must be a JSON object", file=sys.stderr)
        return 2
    servers = loaded.config.mcp_servers
    owners = [k for k in servers if args.tool.startswith(tool_name(k, ""))]
    if not owners:
        print(f"picobot: {args.tool!r} names no configured MCP server", file=sys.stderr)
        return 2
    key = max(owners, key=len)
    ctx = ToolContext("cli", "cli", "cli", "operator", ToolSettings(workspace=loaded.workspace))
    async with _connected({key: servers[key]}, loaded.config.tools.disabled, args.timeout) as mcp:
        try:
            print(await mcp.call(args.tool, arguments, ctx), file=out)
        except ToolError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0
