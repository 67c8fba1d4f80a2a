"""`picobot mcp list|tools|call`: the configured MCP servers, seen from this
machine; and `picobot mcp serve`: picobot itself as an MCP server over stdio
(below, docs/mcp-server.md).

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
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

from agent.mcp.config import McpServerConfig
from agent.mcp.naming import tool_name
from gateway.cli.client.target import connect_host
from gateway.config.loading import LoadedConfig
from gateway.ops.logging import register_secrets
from gateway.tools.mcp import secret_values

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager

__all__ = ["KEY_VARIABLE", "add_mcp_parser", "run_mcp_command", "serve_stdio"]


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
    serve = with_config(
        commands.add_parser(
            "serve", help="picobot's own tools over stdio, relayed to the gateway's /mcp"
        )
    )
    serve.add_argument("--url", help="the gateway's MCP endpoint (default: from the config)")
    serve.add_argument(
        "--key",
        help="an API key of channels.api.keys (default: $PICOBOT_API_KEY, else the gateway token)",
    )
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
    if command == "serve":
        return await serve_stdio(mcp_url(loaded, args.url), api_key(loaded, args.key))
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


# -- picobot mcp serve ---------------------------------------------------------------------
# picobot's own MCP tools over stdio, for a desktop client that launches its
# servers (docs/mcp-server.md). It relays to the running gateway's `/mcp`
# endpoint (channels/api/mcp_server.py) with an API key, so the tools, their
# checks and the conversations are the gateway's own: this process holds no
# state. stdout carries the protocol; anything else goes to stderr.

KEY_VARIABLE = "PICOBOT_API_KEY"
REPLY_WAIT_SECS = 900.0  # above channels.api.reply_timeout_secs' default (300)


def mcp_url(loaded: LoadedConfig, given: str | None) -> str:
    if given:
        return given
    gateway = loaded.config.gateway
    return f"http://{connect_host(gateway.host)}:{gateway.port}/mcp"


def api_key(loaded: LoadedConfig, given: str | None) -> str | None:
    """--key, else $PICOBOT_API_KEY, else the gateway's own token (the operator)."""
    if given:
        return given
    if os.environ.get(KEY_VARIABLE):
        return os.environ[KEY_VARIABLE]
    token = loaded.config.gateway.auth_token
    return token.get_secret_value() or None if token is not None else None


async def serve_stdio(url: str, key: str | None) -> int:
    import httpx
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    # a send_message waits for the agent: up to channels.api.reply_timeout_secs
    timeout = httpx.Timeout(30.0, read=REPLY_WAIT_SECS)
    async with (
        httpx.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as gateway,
    ):
        await gateway.initialize()
        server: Server[Any, Any] = Server("picobot")

        @server.list_tools()  # type: ignore[untyped-decorator, no-untyped-call]
        async def tools() -> list[types.Tool]:
            listed = await gateway.list_tools()
            return listed.tools

        @server.call_tool()  # type: ignore[untyped-decorator]
        async def call_tool(name: str, arguments: dict[str, Any]) -> list[Any]:
            result = await gateway.call_tool(name, arguments)
            if result.isError:
                texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
                raise ValueError("\n".join(texts) or f"{name} failed")
            return list(result.content)

        print(f"picobot mcp serve: relaying to {url}", file=sys.stderr)
        async with stdio_server() as (stdin, stdout):
            await server.run(stdin, stdout, server.create_initialization_options())
    return 0
