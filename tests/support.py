"""Helpers for end-to-end tests: a config on a temporary PICOBOT_HOME and the
real composition root running in-process on 127.0.0.1 port 0."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
import websockets

from channels.base import Channel
from gateway.app import Gateway
from gateway.clock import Clock, utc_now
from gateway.commands import CommandRegistry
from gateway.config.loading import LoadedConfig, parse_config
from tests.fakes.recording_channel import RecordingChannel


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def make_config(home: Path, llm_base_url: str, **sections: Any) -> LoadedConfig:
    """A complete config: WebSocket channel on 127.0.0.1 port 0, the default
    provider pointed at a fake LLM, storage and workspace under `home`."""
    raw: dict[str, Any] = {
        "providers": {
            "default": {
                "type": "openai",
                "base_url": llm_base_url,
                "api_key": "test-key",
                "max_retries": 0,
            }
        },
        "models": {"default": {"model_id": "fake-model"}},
        # typing events at once, so tests see them for every turn
        "gateway": {
            "host": "127.0.0.1",
            "port": 0,
            "shutdown_timeout_secs": 5,
            "typing_delay_secs": 0,
        },
    }
    raw = deep_merge(_storage_override(), deep_merge(raw, sections))
    config, missing = parse_config(raw, {}, source="test config")
    return LoadedConfig(config, None, home, missing)


def process_config(llm_base_url: str, api_key: str = "test-key", **sections: Any) -> dict[str, Any]:
    """The config file of a gateway run as a process (`spawn_gateway`): the
    default provider pointed at a fake LLM, port 0, JSON logs; `sections`
    merged over it."""
    raw: dict[str, Any] = {
        "providers": {"default": {"base_url": llm_base_url, "api_key": api_key, "max_retries": 0}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 10},
        "logging": {"format": "json"},
    }
    return deep_merge(_storage_override(), deep_merge(raw, sections))


def _storage_override() -> dict[str, Any]:
    """With PICOBOT_TEST_SUITE_POSTGRES set to a server's URL (a role that may
    create databases), every gateway a test builds keeps its data in a fresh
    database there: the whole suite on PostgreSQL, for a local run. Tests that
    open the SQLite file themselves then fail; the storage contract suite and
    the PostgreSQL-marked tests are what CI runs on PostgreSQL."""
    admin = os.environ.get("PICOBOT_TEST_SUITE_POSTGRES")
    if not admin:
        return {}
    import psycopg  # only for this mode

    name = f"suite_{os.getpid()}_{next(_suite_databases)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return {"storage": {"url": admin.rsplit("/", 1)[0] + "/" + name}}


_suite_databases = itertools.count()


@asynccontextmanager
async def running_gateway(
    loaded: LoadedConfig,
    *,
    extra_channels: Sequence[Channel] = (),
    commands: CommandRegistry | None = None,
    clock: Clock = utc_now,
) -> AsyncIterator[Gateway]:
    gateway = Gateway(loaded, extra_channels=extra_channels, commands=commands, clock=clock)
    task = asyncio.create_task(gateway.run(), name="test-gateway")
    started = asyncio.create_task(gateway.started.wait())
    done, _ = await asyncio.wait({task, started}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        started.cancel()
        task.result()  # raises the start-up error
    if started not in done:
        started.cancel()
        task.cancel()
        raise TimeoutError("gateway did not start")
    try:
        yield gateway
    finally:
        gateway.request_stop()
        await asyncio.wait_for(task, 20)


class WsClient:
    """A protocol-level WebSocket client for tests (docs/PROTOCOL.md)."""

    def __init__(self, ws: websockets.ClientConnection, chat_id: str) -> None:
        self.ws = ws
        self.chat_id = chat_id
        self._n = 0
        self._prefix = uuid.uuid4().hex[:6]

    async def send(
        self, text: str, msg_id: str | None = None, *, sender_id: str | None = None
    ) -> str:
        """`sender_id`: the sender the frame names (the operator's connections may)."""
        self._n += 1
        msg_id = msg_id or f"{self._prefix}-{self._n}"
        frame = {"type": "message", "id": msg_id, "text": text}
        if sender_id is not None:
            frame["sender_id"] = sender_id
        await self.ws.send(json.dumps(frame))
        return msg_id

    async def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        frame: dict[str, Any] = json.loads(raw)
        return frame

    async def recv_type(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        """Frames of other types until one of `kind` arrives."""
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.recv(timeout)
                if frame["type"] == kind:
                    return frame

    async def ask(self, text: str, timeout: float = 10.0, *, sender_id: str | None = None) -> str:
        """Send a message and return the text of the reply to it."""
        msg_id = await self.send(text, sender_id=sender_id)
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.recv(timeout)
                if frame["type"] == "message" and frame.get("reply_to") == msg_id:
                    return str(frame["text"])
                if frame["type"] == "error":
                    raise AssertionError(f"error frame: {frame}")


@asynccontextmanager
async def ws_client(
    gateway: Gateway, chat_id: str = "chat-1", token: str | None = None
) -> AsyncIterator[WsClient]:
    url = f"ws://127.0.0.1:{gateway.port}/ws"
    async with websockets.connect(url) as ws:
        hello: dict[str, Any] = {"type": "hello", "protocol": 1, "chat_id": chat_id}
        if token is not None:
            hello["token"] = token
        await ws.send(json.dumps(hello))
        welcome = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert welcome["type"] == "welcome", welcome
        yield WsClient(ws, chat_id)


async def replies_written(gw: Gateway, timeout: float = 10.0) -> None:
    """Until no inbox row is open: every reply is an outbox row by then.
    Storage offers no event for that, so this looks every 20 ms, for
    `timeout` at most."""
    assert gw.store is not None
    async with asyncio.timeout(timeout):
        while await gw.store.unfinished_inbox():
            await asyncio.sleep(0.02)


PICOBOT = str(Path(sys.executable).parent / "picobot")


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a picobot subprocess: no provider keys leak in."""
    keep = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"PICOBOT_HOME": str(home), "NO_PROXY": "127.0.0.1,localhost", **extra})
    return env


@dataclass
class GatewayProcess:
    proc: asyncio.subprocess.Process
    port: int
    lines: list[dict[str, Any]]
    _reader: asyncio.Task[None]
    _changed: asyncio.Condition

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == name]

    async def wait_event(self, name: str, timeout: float = 10, count: int = 1) -> dict[str, Any]:
        """The first log line of event `name`, once `count` of them were logged."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.events(name)) >= count)
        return self.events(name)[0]

    async def stop(self, sig: int | None = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` (None: none, it was sent already) and wait for the exit code."""
        if sig is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.wait_for(self._reader, 5)
        return code


async def spawn_gateway(
    config: dict[str, Any], home: Path, env: dict[str, str], wrapper: Sequence[str] = ()
) -> GatewayProcess:
    """Run `picobot gateway` as a real process; returns once it logged its port.
    `wrapper`: a command to run it under (e.g. setpriv dropping a capability)."""
    path = home / "config.json"
    path.write_text(json.dumps(config))
    proc = await asyncio.create_subprocess_exec(
        *wrapper,
        PICOBOT,
        "gateway",
        "--config",
        str(path),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    lines: list[dict[str, Any]] = []
    changed = asyncio.Condition()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def read() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"event": "raw", "text": raw.decode(errors="replace")}
            async with changed:
                lines.append(line)
                changed.notify_all()
            if line.get("event") == "gateway_started" and not port.done():
                port.set_result(int(line["port"]))
        if not port.done():
            port.set_exception(RuntimeError(f"gateway exited before starting: {lines[-5:]}"))

    reader = asyncio.create_task(read(), name="gateway-log-reader")
    try:
        bound = await asyncio.wait_for(asyncio.shield(port), 30)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return GatewayProcess(proc, bound, lines, reader, changed)


async def run_picobot(
    home: Path, *args: str, timeout: float = 60, cwd: Path | None = None
) -> tuple[int, str]:
    """`picobot ARGS` as a real process with `home`'s environment (in `cwd`),
    to its end: its exit code and its output (stdout and stderr together)."""
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        *args,
        cwd=cwd,
        env=child_env(home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of an LLM request without system messages (AGENT.md etc.)."""
    return [m for m in body["messages"] if m["role"] != "system"]


def newest(body: dict[str, Any]) -> dict[str, Any]:
    """The newest message of an OpenAI-style request: the last one before the
    per-turn system blocks (the skill index …) that follow the history."""
    messages: list[dict[str, Any]] = body["messages"]
    end = len(messages)
    while end > 1 and messages[end - 1]["role"] == "system":
        end -= 1
    return messages[end - 1]


def processes_with(marker: str) -> list[int]:
    """The pids whose command line contains `marker` (NUL between arguments)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


class ShiftedClock:
    """The gateway's clock (`Gateway(clock=…)`), moved forward by the test
    instead of waiting: the wall clock plus `offset`."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)


def process_gone(pid: int) -> bool:
    """Whether no process has `pid` any more (signal 0 probes it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Polls `predicate` (awaited when it returns an awaitable) until it is
    true: for state that offers nothing to await (another process, a file, a
    worker's back-off)."""
    async with asyncio.timeout(timeout):
        while True:
            result = predicate()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
            await asyncio.sleep(0.05)


_asked = itertools.count()


async def ask_on(channel: RecordingChannel, chat_id: str, text: str, **fields: object) -> str:
    """Send `text` into `channel` (a RecordingChannel) and return the reply
    to it; other messages sent meanwhile (notices) are passed over."""
    message_id = f"ask-{next(_asked)}"
    seen = len(channel.sent)
    await channel.submit(chat_id, text, message_id, **fields)
    while True:
        sent = await channel.wait_sent(seen + 1)
        for s in sent[seen:]:
            if s.message.reply_to_message_id == message_id:
                return s.message.text
        seen = len(sent)


@contextmanager
def logging_restored() -> Iterator[None]:
    """Undo what `configure_logging` did to the process's logging, for tests
    that run a command which sets it up (root handlers and level, the levels
    of the loggers it tunes, structlog's configuration and bound context)."""
    from gateway.ops.logging import _CHATTY_LOGGERS, _QUIET_LOGGERS

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        for name in (*_CHATTY_LOGGERS, *_QUIET_LOGGERS):
            logging.getLogger(name).setLevel(logging.NOTSET)
        structlog.contextvars.clear_contextvars()
        structlog.reset_defaults()
