"""The `picobot` program: the argument parser, one function per subcommand, and `main`.

Subcommands: gateway, agent, doctor, init, backup/restore, outbox, dead-letters, jobs, pairing, workers,
skills, sessions, usage, limits,
mcp, channels.
Each bigger family lives in its own module of this package; this one only
parses the command line and hands over.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# Everything else is imported by the command that needs it: `picobot --help`
# loads no config model, SDK or logging pipeline.
if TYPE_CHECKING:
    from gateway.config.core import Config
    from gateway.config.loading import LoadedConfig

__all__ = ["main"]


DISTRIBUTION = "picobot-gateway"  # pyproject.toml's [project] name


def _secret_values(config: Config) -> list[str]:
    """Every SecretStr in the config, for log redaction."""
    found: list[str] = []

    def walk(node: object) -> None:
        from pydantic import BaseModel, SecretStr

        if isinstance(node, SecretStr):
            value = node.get_secret_value()
            if value:
                found.append(value)
        elif isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name))
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list | tuple):
            for value in node:
                walk(value)

    walk(config)
    for provider in config.providers.values():
        found.extend(v for v in provider.extra_headers.values() if v)
    return found


def _load(args: argparse.Namespace) -> LoadedConfig:
    from gateway.config.loading import load_config

    return load_config(getattr(args, "config", None))


async def _settle_memory(started: asyncio.Event, loaded: asyncio.Event) -> None:
    """Start-up runs with the garbage collector off (`cmd_gateway`): its
    objects — modules, classes, config, about 80,000 — live as long as the
    process, and collecting passes over them cost a tenth of start-up and
    stall the event loop later on. Once the gateway has started they are
    frozen (no collection looks at them again) and collection resumes for
    what comes after. (The few hundred cycles start-up leaves are frozen too:
    collecting them first would cost more than they take.) A provider's SDK
    is imported at its first call (agent.providers.deferred), with some
    50,000 objects of its own; once it is, what is alive is frozen again
    (what the turns in flight then hold is frozen with it, once)."""
    await started.wait()
    gc.freeze()
    gc.enable()
    await loaded.wait()
    gc.freeze()


async def _serve(loaded: LoadedConfig) -> int:
    import structlog

    from gateway.app import Gateway
    from gateway.lifecycle import cancel_and_wait

    gateway = Gateway(loaded)
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            structlog.get_logger("picobot").info(
                "signal_received", signal=signal.Signals(signum).name
            )
            gateway.request_stop()
        else:
            # Every accepted message is already committed; exit at once.
            sys.stderr.write("picobot: second signal, exiting now\n")
            os._exit(130)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    settle = asyncio.create_task(
        _settle_memory(gateway.started, gateway.provider_loaded), name="settle-memory"
    )
    try:
        await gateway.run()
    finally:
        await cancel_and_wait([settle])
    return 0


def _import_structlog_without_rich() -> None:
    """structlog imports rich and pygments, when installed, to pretty-print
    tracebacks on a console. The gateway never prints that way (JSON lines,
    or structlog's plain console renderer), and rich is installed for the
    terminal client's Markdown; yet in the daemon the import costs ~4 MiB
    for as long as it runs. So every command imports structlog first with rich
    hidden (a None entry in sys.modules makes `import rich` fail); rich
    imports as usual afterwards."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        importlib.import_module("structlog")
    finally:
        del sys.modules["rich"]


def cmd_gateway(args: argparse.Namespace) -> int:
    gc.disable()  # until the gateway has settled: `_settle_memory`
    try:
        return _gateway(args)
    finally:
        gc.enable()


def _gateway(args: argparse.Namespace) -> int:
    import structlog

    from gateway.lifecycle import StartupError
    from gateway.ops.logging import configure_logging, register_secrets
    from storage.errors import SchemaTooNew, StorageUnusable

    loaded = _load(args)
    cfg = loaded.config
    configure_logging(cfg.logging.level, cfg.logging.format)
    register_secrets(_secret_values(cfg))
    log = structlog.get_logger("picobot")
    from gateway.ops.hardening import make_non_dumpable

    if not make_non_dumpable():  # same-uid processes could read our environ
        log.warning("gateway_dumpable", reason="prctl(PR_SET_DUMPABLE, 0) unavailable")
    log.info("config_loaded", path=str(loaded.path) if loaded.path else "(built-in defaults)")
    for where, var in loaded.missing_env_in_use.items():
        log.warning("config_env_missing", config_path=where, variable=var)
    try:
        return asyncio.run(_serve(loaded))
    except (SchemaTooNew, StorageUnusable) as exc:  # as a config error: the operator fixes it
        print(f"picobot: {exc}", file=sys.stderr)
        return 2
    except (OSError, StartupError) as exc:  # what started was stopped again
        print(f"picobot: cannot start: {exc}", file=sys.stderr)
        return 1


def cmd_agent(args: argparse.Namespace) -> int:
    from gateway.cli.client.main import AgentOptions, agent_command

    options = AgentOptions(
        gateway_url=args.gateway_url,
        token=args.token,
        config=args.config,
        chat=args.chat,
        remember=args.remember,
        hide_tools=args.hide_tools,
        message=args.message,
        timeout=args.timeout,
    )
    return agent_command(options, os.environ, Path.cwd())


def cmd_doctor(args: argparse.Namespace) -> int:
    from gateway.cli.doctor.main import run_doctor

    return asyncio.run(run_doctor(args.config, os.environ, probe=args.probe, out=sys.stdout))


def cmd_init(args: argparse.Namespace) -> int:
    from gateway.cli.init import run_init

    return run_init(args, os.environ, interactive=sys.stdin.isatty(), out=sys.stdout)


def cmd_backup(args: argparse.Namespace) -> int:
    from gateway.cli.backup import run_backup

    return asyncio.run(run_backup(_load(args).storage_url, Path(args.file)))


def cmd_restore(args: argparse.Namespace) -> int:
    from gateway.cli.backup import run_restore

    return run_restore(Path(args.file), _load(args).storage_url, force=args.force)


def cmd_storage_copy(args: argparse.Namespace) -> int:
    from gateway.cli.storage_copy import run_storage_copy

    source = args.source if args.source else _load(args).storage_url
    return asyncio.run(run_storage_copy(source, args.target))


def cmd_outbox(args: argparse.Namespace) -> int:
    from gateway.cli.outbox import run_outbox_command

    return asyncio.run(run_outbox_command(args, _load(args)))


def cmd_dead_letters(args: argparse.Namespace) -> int:
    from gateway.cli.dead_letters import run_dead_letters_command

    return asyncio.run(run_dead_letters_command(args, _load(args)))


def cmd_workers(args: argparse.Namespace) -> int:
    from gateway.cli.workers import run_workers_command

    return asyncio.run(run_workers_command(args, _load(args)))


def cmd_jobs(args: argparse.Namespace) -> int:
    from gateway.cli.jobs import print_jobs_help, run_jobs_command

    if args.jobs_command is None:
        return print_jobs_help(args)
    return asyncio.run(run_jobs_command(args, _load(args)))


def cmd_pairing(args: argparse.Namespace) -> int:
    from gateway.cli.pairing import run_pairing_command

    return asyncio.run(run_pairing_command(args, _load(args)))


def cmd_memory(args: argparse.Namespace) -> int:
    from gateway.cli.memory import run_memory_command

    return asyncio.run(run_memory_command(args, _load(args)))


def cmd_mcp(args: argparse.Namespace) -> int:
    from gateway.cli.mcp import run_mcp_command
    from gateway.ops.logging import configure_logging

    loaded = _load(args)
    # warnings (a server that cannot be reached, a name taken) go to stderr
    configure_logging("warning", "console", stream=sys.stderr)
    return asyncio.run(run_mcp_command(args, loaded))


def cmd_skills(args: argparse.Namespace) -> int:
    from gateway.cli.skills import run_skills_command

    return asyncio.run(run_skills_command(args, _load(args)))


def cmd_sessions(args: argparse.Namespace) -> int:
    from gateway.cli.sessions import run_sessions_command

    return asyncio.run(run_sessions_command(args, _load(args)))


def cmd_usage(args: argparse.Namespace) -> int:
    from gateway.cli.spend import run_usage_command
    from gateway.ops.logging import configure_logging

    loaded = _load(args)
    configure_logging("warning", "console", stream=sys.stderr)  # stdout: the report (--json)
    return asyncio.run(run_usage_command(args, loaded))


def cmd_limits(args: argparse.Namespace) -> int:
    from gateway.cli.spend import run_limits_command
    from gateway.ops.logging import configure_logging

    loaded = _load(args)
    configure_logging("warning", "console", stream=sys.stderr)  # stdout: the budgets
    return asyncio.run(run_limits_command(args, loaded))


def cmd_channels_login(args: argparse.Namespace) -> int:
    if args.channel != "wechat":
        print(f"picobot: channel {args.channel!r} has no login flow", file=sys.stderr)
        return 2
    from channels.wechat.login import LoginError, login

    loaded = _load(args)

    async def prompt(question: str) -> str:
        return await asyncio.to_thread(input, question)

    try:
        asyncio.run(
            login(loaded.config.channels.wechat, out=sys.stdout, prompt=prompt, home=loaded.home)
        )
    except LoginError as exc:
        print(f"picobot: WeChat login failed: {exc}", file=sys.stderr)
        return 1
    return 0


AddParser = Callable[
    [
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    ],
    None,
]

# name (module gateway.cli.<name>, or the one FAMILY_MODULES names; function
# add_<name>_parser), its --help line, its command
FAMILIES: tuple[tuple[str, str, Callable[[argparse.Namespace], int]], ...] = (
    ("outbox", "inspect, retry or discard undelivered replies", cmd_outbox),
    ("dead-letters", "inbound events that could not be recorded", cmd_dead_letters),
    ("jobs", "list and control scheduler jobs", cmd_jobs),
    ("pairing", "let new users in with pairing codes", cmd_pairing),
    ("memory", "long-term memories, per user", cmd_memory),
    ("mcp", "check and call the configured MCP servers", cmd_mcp),
    ("skills", "the skills found, and their usage events", cmd_skills),
    ("sessions", "stored sessions and their transcripts", cmd_sessions),
    ("usage", "model calls, tokens and cost by day, agent and model", cmd_usage),
    ("limits", "budgets from the config and set at run time", cmd_limits),
    ("workers", "the workers sharing this database and their leases", cmd_workers),
)
# a family whose parser is in a module of another name (gateway.cli.<module>)
FAMILY_MODULES = {"usage": "spend", "limits": "spend"}


def _version() -> str:
    """The installed distribution's version (pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser; with `command`, only that one's in full
    (the others by name and help line), so that what it does not need is
    never imported."""
    parser = argparse.ArgumentParser(
        prog="picobot", description="A self-hosted chat gateway for an LLM agent."
    )
    parser.add_argument("--version", action="version", version=f"picobot {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--config", help="config file (default: $PICOBOT_HOME/config.json, then ./config.json)"
        )
        return p

    with_config(sub.add_parser("gateway", help="run the gateway daemon")).set_defaults(
        func=cmd_gateway
    )

    agent = with_config(sub.add_parser("agent", help="chat with the gateway from the terminal"))
    agent.add_argument(
        "--gateway-url",
        help="the gateway: ws://, wss://, http:// or https://HOST:PORT[/PATH] (no path: /ws; "
        "default: gateway.host, gateway.port and channels.websocket.path of the config, "
        "else ws://127.0.0.1:19876/ws)",
    )
    agent.add_argument(
        "--token", help="the gateway's token (default: PICOBOT_TOKEN, else the config's)"
    )
    agent.add_argument("--chat", help="talk in this chat id (default: this client's own)")
    agent.add_argument(
        "--remember", action="store_true", help="with --chat: make it the default from now on"
    )
    agent.add_argument(
        "--hide-tools", action="store_true", help="do not show tool calls (/tools toggles)"
    )
    agent.add_argument("-m", "--message", help="send one message, print the reply, exit")
    agent.add_argument(
        "--timeout", type=float, default=600.0, help="with -m: seconds to wait for the reply"
    )
    agent.set_defaults(func=cmd_agent)

    doctor = with_config(sub.add_parser("doctor", help="check the configuration and environment"))
    doctor.add_argument(
        "--probe", action="store_true", help="also reach providers and channel APIs"
    )
    doctor.set_defaults(func=cmd_doctor)

    init = sub.add_parser("init", help="write a starter config")
    if command in (None, "init"):
        from gateway.cli.init import add_init_arguments

        add_init_arguments(init)
    init.set_defaults(func=cmd_init)

    backup = with_config(sub.add_parser("backup", help="online copy of the database"))
    backup.add_argument("file")
    backup.set_defaults(func=cmd_backup)
    restore = with_config(sub.add_parser("restore", help="put a backup in place (gateway stopped)"))
    restore.add_argument("file")
    restore.add_argument("--force", action="store_true")
    restore.set_defaults(func=cmd_restore)
    storage = sub.add_parser("storage", help="move the database between backends")
    storage_sub = storage.add_subparsers(dest="storage_command", required=True)
    copy = with_config(
        storage_sub.add_parser("copy", help="copy every table into a new, empty database")
    )
    if command in (None, "storage"):
        from gateway.cli.storage_copy import add_copy_arguments

        add_copy_arguments(copy)
    copy.set_defaults(func=cmd_storage_copy)

    # the command families, each with its parser in its own module, loaded
    # only for the command about to run (the top-level help needs their names)
    for name, summary, func in FAMILIES:
        if command is None or command == name:
            where = FAMILY_MODULES.get(name, name).replace("-", "_")
            module = importlib.import_module(f"gateway.cli.{where}")
            add: AddParser = getattr(module, f"add_{name.replace('-', '_')}_parser")
            add(sub, with_config)
        else:
            sub.add_parser(name, help=summary)
        sub.choices[name].set_defaults(func=func)

    channels = sub.add_parser("channels", help="channel set-up")
    ch_sub = channels.add_subparsers(dest="action", required=True)
    ch_login = with_config(ch_sub.add_parser("login", help="log a channel in (wechat: QR code)"))
    ch_login.add_argument("channel")
    channels.set_defaults(func=cmd_channels_login)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    if command:  # a command's parser may import the runtime; `picobot --help` loads nothing
        _import_structlog_without_rich()
    args = build_parser(command).parse_args(argv)
    from gateway.config.core import ConfigError

    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"picobot: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
