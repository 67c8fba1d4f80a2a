"""`picobot agent`: the terminal client for the WebSocket channel.

Interactive mode (gateway.cli.client.tui): line editing and history, input
live while the agent works, replies rendered as Markdown, reconnecting by
itself. One-shot mode (`-m`, gateway.cli.client.oneshot): print the reply and
exit with a code that says how it went (`ExitCode`). The gateway, its URL and
token come from the command line or the gateway's own config (`target`). The
client keeps a stable default chat id in a small state file so reconnecting
continues the conversation (`--chat` talks elsewhere for one run), and
remembers the reply ids it has shown so a reply re-sent after a reconnect is
shown once. The token is never printed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gateway.cli.client.link import ClientError, Link, Refused, stop_task
from gateway.cli.client.oneshot import ExitCode, one_shot
from gateway.cli.client.state import ClientState
from gateway.cli.client.target import Target, resolve_target

__all__ = ["AgentOptions", "ClientState", "ExitCode", "agent_command", "run_client"]


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """`picobot agent`'s command line."""

    gateway_url: str | None = None
    token: str | None = None
    config: str | None = None
    chat: str | None = None
    remember: bool = False
    hide_tools: bool = False
    message: str | None = None
    timeout: float = 600.0


def agent_command(options: AgentOptions, environ: Mapping[str, str], cwd: Path) -> int:
    """Run `picobot agent`; the exit code. `ConfigError` goes to the caller (2)."""
    from gateway.config.loading import picobot_home

    if options.remember and not options.chat:
        print("picobot agent: --remember goes with --chat ID", file=sys.stderr)
        return int(ExitCode.USAGE)
    target = resolve_target(
        url=options.gateway_url,
        token=options.token,
        config=options.config,
        environ=environ,
        cwd=cwd,
    )
    home = picobot_home(environ)
    state = ClientState.load(home / "client.json")
    if options.chat:
        state.use_chat(options.chat, remember=options.remember)
    return asyncio.run(
        run_client(
            target,
            state,
            message=options.message,
            reply_timeout=options.timeout,
            history_path=home / "client_history",
            show_tools=not options.hide_tools,
            environ=environ,
        )
    )


def _unreachable(target: Target, link: Link, exc: ClientError) -> str:
    where = "" if target.source in ("default", "--gateway-url") else f" (from {target.source})"
    lines = [f"picobot agent: {exc}{where}"]
    if isinstance(exc, Refused):
        if target.token_hint:
            lines.append(f"picobot agent: {target.token_hint}: set it, or pass --token")
    elif target.source == "default":
        lines.append(
            f"picobot agent: no config file found; {link.shown_url} is the default "
            "(--config or --gateway-url name another)"
        )
    return "\n".join(lines)


async def run_client(
    target: Target,
    state: ClientState,
    *,
    message: str | None,
    reply_timeout: float,
    history_path: Path,
    show_tools: bool = True,
    environ: Mapping[str, str] = os.environ,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    link = Link(target.url, target.token, state.chat_id)
    try:
        await link.open()
    except ClientError as exc:
        print(_unreachable(target, link, exc), file=err)
        return int(ExitCode.UNREACHABLE)
    reader = asyncio.create_task(link.run(), name="client-link")
    try:
        if message is not None:
            progress = err.isatty() and environ.get("TERM", "") != "dumb"
            return await one_shot(link, state, message, reply_timeout, out, err, progress=progress)
        # prompt_toolkit and rich: only here
        from gateway.cli.client.render import hyperlinks_supported
        from gateway.cli.client.tui import Interactive

        interactive = Interactive(
            link,
            state,
            history_path,
            color="NO_COLOR" not in environ,
            hyperlinks=hyperlinks_supported(environ, out.isatty()),
            show_tools=show_tools,
        )
        return await interactive.run()
    except ClientError as exc:
        print(f"picobot agent: {exc}", file=err)
        return int(ExitCode.FAILED)
    finally:
        await stop_task(reader)
        await link.close()
