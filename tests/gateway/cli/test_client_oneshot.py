"""`picobot agent -m` (issue 59): the exit code says how it went, told from
the protocol's frames, not from the reply's wording. Against the real gateway
in-process and the fake LLM; the real process is tests/e2e/test_cli_agent_exits.py."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from gateway.cli.client.main import ClientState, ExitCode, run_client
from gateway.cli.client.target import Target
from gateway.config.loading import LoadedConfig
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, wait_until


class Run:
    """One `-m` run's outcome."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


async def ask(
    home: Path,
    port: int,
    text: str,
    *,
    token: str | None = None,
    timeout: float = 10,
    err: io.StringIO | None = None,
    progress: bool = False,
) -> Run:
    out, err = io.StringIO(), err or io.StringIO()
    if progress:
        err.isatty = lambda: True  # type: ignore[method-assign]
    state = ClientState.load(home / "client.json")
    code = await run_client(
        Target(f"ws://127.0.0.1:{port}/ws", token),
        state,
        message=text,
        reply_timeout=timeout,
        history_path=home / "client_history",
        environ={"TERM": "xterm"},
        out=out,
        err=err,
    )
    return Run(code, out.getvalue(), err.getvalue())


def config(home: Path, llm: FakeOpenAI, **sections: Any) -> LoadedConfig:
    return make_config(home, llm.base_url, **sections)


async def test_an_answer_is_0_on_stdout(home: Path, llm: FakeOpenAI) -> None:
    llm.add_text("Hello.")
    async with running_gateway(config(home, llm)) as gw:
        run = await ask(home, gw.port, "hi")
        assert (run.code, run.out, run.err) == (ExitCode.ANSWERED, "Hello.\n", "")
        # a command is answered by no turn: still an answer
        run = await ask(home, gw.port, "/status")
        assert run.code == ExitCode.ANSWERED, run.err
        assert run.out.strip()


async def test_a_provider_failure_is_1_on_stderr_and_the_next_answer_0_again(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_error(500)
    async with running_gateway(config(home, llm)) as gw:
        run = await ask(home, gw.port, "hi")
        assert run.code == ExitCode.FAILED
        assert run.out == ""
        assert run.err.strip()  # the gateway's short failure text
        llm.add_text("Back.")
        run = await ask(home, gw.port, "again")
        assert (run.code, run.out) == (ExitCode.ANSWERED, "Back.\n")


async def test_no_api_key_is_1(home: Path, llm: FakeOpenAI) -> None:
    loaded = config(home, llm, providers={"default": {"api_key": ""}})
    async with running_gateway(loaded) as gw:
        run = await ask(home, gw.port, "hi")
    assert run.code == ExitCode.FAILED
    assert "api key" in run.err.lower() or "api_key" in run.err.lower(), run.err
    assert llm.requests == []


async def test_a_message_the_access_policy_refuses_is_4(home: Path, llm: FakeOpenAI) -> None:
    loaded = config(home, llm, channels={"websocket": {"allow_from": ["alice"]}})
    async with running_gateway(loaded) as gw:
        run = await ask(home, gw.port, "let me in")
    assert run.code == ExitCode.REFUSED
    assert run.out == ""
    assert run.err.strip()  # how to get access
    assert llm.requests == []


async def test_a_tool_call_waiting_for_approval_is_6(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": "touch x"})
    rules = {"bash": {"mode": "always"}}
    loaded = config(home, llm, tools={"approval": {"tools": rules}, "bash": {"sandbox": "off"}})
    async with running_gateway(loaded) as gw:
        run = await ask(home, gw.port, "make x")
    assert run.code == ExitCode.APPROVAL
    assert "/approve" in run.err


async def test_no_reply_in_time_is_5(home: Path, llm: FakeOpenAI) -> None:
    llm.hold()
    try:
        async with running_gateway(config(home, llm)) as gw:
            run = await ask(home, gw.port, "slowly", timeout=0.5)
    finally:
        llm.release()
    assert run.code == ExitCode.TIMEOUT
    assert "no reply within 0.5s" in run.err


async def test_no_gateway_or_a_wrong_token_is_3(home: Path, llm: FakeOpenAI) -> None:
    run = await ask(home, 9, "anyone?")  # nothing listens on the discard port
    assert run.code == ExitCode.UNREACHABLE
    assert "cannot connect to ws://127.0.0.1:9/ws" in run.err
    loaded = config(home, llm, gateway={"auth_token": "right"})
    async with running_gateway(loaded) as gw:
        run = await ask(home, gw.port, "hi", token="s3cret-guess")
    assert run.code == ExitCode.UNREACHABLE
    assert "token" in run.err
    assert "s3cret-guess" not in run.err


async def test_on_a_terminal_the_wait_is_shown_and_cleared(home: Path, llm: FakeOpenAI) -> None:
    """stderr on a terminal: a status line counts the seconds while the turn
    runs (the protocol has no frame for provider retries: they show as
    working), and is erased before the answer."""
    llm.hold()
    err = io.StringIO()
    async with running_gateway(config(home, llm)) as gw:
        running = asyncio.create_task(ask(home, gw.port, "hi", err=err, progress=True))
        try:
            await wait_until(lambda: "… working" in err.getvalue())
        finally:
            llm.release()
        run = await running
    assert (run.code, run.out) == (ExitCode.ANSWERED, "echo: hi\n")
    assert run.err.endswith("\r\x1b[K")


class ScriptedGateway:
    """A scripted /ws server on 127.0.0.1 port 0: welcome, ack, then one reply
    with a `run_id`, marked `failed` or not. The client judges by the field
    alone: it sends nothing after the message (no query)."""

    def __init__(self, *, marked: bool | None) -> None:
        self.marked = marked
        self.after_message: list[str] = []

    async def handle(self, ws: websockets.ServerConnection) -> None:
        hello = json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "welcome", "protocol": 1, "chat_id": hello["chat_id"]}))
        async for raw in ws:
            frame = json.loads(raw)
            if frame["type"] != "message":
                self.after_message.append(frame["type"])
                continue
            await ws.send(json.dumps({"type": "ack", "id": frame["id"], "status": "accepted"}))
            reply = {"type": "message", "id": 1, "reply_to": frame["id"], "run_id": "r1"}
            reply.update(session_id="s1", text="The provider is not answering.")
            if self.marked is not None:
                reply["failed"] = self.marked
            await ws.send(json.dumps(reply))


@pytest.mark.parametrize(
    ("marked", "code"),
    [(True, ExitCode.FAILED), (False, ExitCode.ANSWERED), (None, ExitCode.ANSWERED)],
)
async def test_a_failed_turn_is_told_by_the_field(
    home: Path, marked: bool | None, code: ExitCode
) -> None:
    fake = ScriptedGateway(marked=marked)
    async with websockets.serve(fake.handle, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        run = await ask(home, port, "hi")
    assert run.code == code
    assert fake.after_message == []
    text = run.err if code else run.out
    assert text == "The provider is not answering.\n"
