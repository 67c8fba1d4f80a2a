"""Does a turn cost more in a long chat? On the real path (bench.process).

- `scaling`: chats filled through the storage layer with 10, 1,000 and 8,000
  short messages (below the compaction trigger, so the whole history is sent
  every turn): the cold first turn (opening the session from storage), then
  the gateway's CPU per warm turn, one chat of each size taking turns.
- `big_session`: one session of 50,000 messages (~2.8 MB, far beyond the
  128k-token window): the first turn must succeed with a request inside the
  window; its CPU (the opening included), the background compaction's, and
  that of later turns, which should cost what a short chat's do (the two
  chats take turns, as in `scaling`).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agent.messages import ChatMessage, Marker, Role, tokens_for_chars
from agent.prompt_file import DEFAULT_AGENT_PROMPT
from bench.harness import ask, connect
from bench.process import CpuMeter, FakeLLM, GatewayProc, fake_llm, gateway_process, shipped_config
from storage.sql.conversations import messages, sessions
from storage.sqlite.db import Database

WINDOW_TOKENS = 128_000  # the shipped default


def _fill(conn: Any, chat_id: str, count: int, size: int) -> None:
    """A session as the gateway writes one: AGENT.md first, then the turns."""
    sessions.create_session(conn, "websocket", chat_id, chat_id)
    prompt = ChatMessage.system(DEFAULT_AGENT_PROMPT.strip(), marker=Marker.AGENT_PROMPT)
    messages.append_messages(conn, chat_id, [prompt], user_turn_prompt=True)
    batch: list[ChatMessage] = []
    for i in range(count // 2):
        batch.append(ChatMessage.user(f"q{i} ".ljust(size, "q")))
        batch.append(ChatMessage(Role.ASSISTANT, f"a{i} ".ljust(size, "a")))
        if len(batch) >= 5_000:
            messages.append_messages(conn, chat_id, batch)
            batch = []
    if batch:
        messages.append_messages(conn, chat_id, batch)


async def filled(home: Path, chats: dict[str, tuple[int, int]]) -> None:
    """`chats`: chat id → (messages, characters each), stored before the gateway starts."""
    async with Database(home / "storage" / "sessions.db") as db:
        for chat_id, (count, size) in chats.items():
            await db.write(lambda c, i=chat_id, n=count, s=size: _fill(c, i, n, s))


async def _first_turns(gw: GatewayProc, chat_ids: list[str]) -> float:
    """CPU ms per first turn (the session opened from storage), over `chat_ids`."""
    sockets = [await connect(gw.ws_url, chat_id) for chat_id in chat_ids]
    meter = CpuMeter(gw.pid)
    meter.start()
    for i, ws in enumerate(sockets):
        await ask(ws, f"f{i}", "hello")
    first: float = meter.stop(len(sockets))["cpu_ms_per_message"]
    for ws in sockets:
        await ws.close()
    return first


async def _warm_turns(gw: GatewayProc, chat_id: str, n: int) -> float:
    """CPU ms per turn of `n` turns in a chat already open."""
    ws = await connect(gw.ws_url, chat_id)
    try:
        await ask(ws, "w0", "hello")
        meter = CpuMeter(gw.pid)
        meter.start()
        for i in range(1, n + 1):
            await ask(ws, f"w{i}", f"turn {i}")
        warm: float = meter.stop(n)["cpu_ms_per_message"]
    finally:
        await ws.close()
    return warm


SETTLE_SECS = 0.02  # a turn's work after its reply frame (the send marked, ...) ends in ~1 ms


async def _interleaved_warm_turns(
    gw: GatewayProc, chat_ids: dict[str, str], n: int
) -> dict[str, float]:
    """CPU ms per turn of `n` turns in each of `chat_ids` (already open), one
    chat after the other turn by turn, so that each size sees the machine at
    the same speed (it drifts within minutes)."""
    sockets = {key: await connect(gw.ws_url, chat_id) for key, chat_id in chat_ids.items()}
    used = dict.fromkeys(sockets, 0.0)
    try:
        for ws in sockets.values():
            await ask(ws, "i0", "hello")
        for i in range(1, n + 1):
            for key, ws in sockets.items():
                meter = CpuMeter(gw.pid)
                meter.start()
                await ask(ws, f"i{i}", f"turn {i}")  # ids unique in the chat: not duplicates
                await asyncio.sleep(SETTLE_SECS)  # what follows the reply is this turn's too
                used[key] += meter.stop(1)["cpu_ms_per_message"]
    finally:
        for ws in sockets.values():
            await ws.close()
    return {key: round(total / n, 3) for key, total in used.items()}


async def scaling(
    sizes: tuple[int, ...] = (10, 1_000, 8_000), turns: int = 50, chats: int = 5
) -> dict[str, Any]:
    """`chats` chats of each size for the cold first turns, `turns` warm turns in one."""
    stored = {f"hist-{n}-{c}": (n, 20) for n in sizes for c in range(chats)}
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        home = Path(tmp)
        await filled(home, stored)
        async with fake_llm(0.0, home) as llm:
            config = shipped_config(llm.base_url)
            async with gateway_process(config, home) as gw:
                await _warm_turns(gw, "warm-up", 5)
                first = {
                    n: await _first_turns(gw, [f"hist-{n}-{c}" for c in range(chats)])
                    for n in sizes
                }
                warm = await _interleaved_warm_turns(
                    gw, {str(n): f"hist-{n}-0" for n in sizes}, turns
                )
                # the same chats' turns back to back (each turn's trailing
                # writes share a commit with the next one's), one size after another
                closed = {n: await _warm_turns(gw, f"hist-{n}-0", turns) for n in sizes}
                rows = {
                    str(n): {
                        "first_turn_cpu_ms": first[n],
                        "warm_turn_cpu_ms": warm[str(n)],
                        "back_to_back_turn_cpu_ms": closed[n],
                    }
                    for n in sizes
                }

    def ratio(figure: str) -> float | None:
        short, long = rows[str(sizes[0])][figure], rows[str(sizes[-1])][figure]
        return round(long / short, 2) if short else None

    def extra(figure: str) -> float:  # the ratio moves with the short chat's cost; this does not
        return round(rows[str(sizes[-1])][figure] - rows[str(sizes[0])][figure], 3)

    return {
        "scenario": "history_scaling",
        "path": "picobot gateway process, shipped defaults, OpenAI SDK → fake LLM process (HTTP)",
        "message_chars": 20,
        "warm_turns": turns,
        "cold_chats": chats,
        "by_history_messages": rows,
        "longest_vs_shortest": ratio("warm_turn_cpu_ms"),
        "back_to_back_longest_vs_shortest": ratio("back_to_back_turn_cpu_ms"),
        "longest_extra_cpu_ms": extra("warm_turn_cpu_ms"),
        "back_to_back_longest_extra_cpu_ms": extra("back_to_back_turn_cpu_ms"),
        "target_longest_vs_shortest": 1.5,
    }


async def _idle(gw: GatewayProc, quiet_secs: float = 1.0, limit_secs: float = 120.0) -> float:
    """Wait until the gateway used no CPU for `quiet_secs` (compaction done); CPU ms spent."""
    meter = CpuMeter(gw.pid)
    meter.start()
    total = 0.0
    for _ in range(int(limit_secs / quiet_secs)):
        probe = CpuMeter(gw.pid)
        probe.start()
        await asyncio.sleep(quiet_secs)
        if probe.stop(1)["cpu_ms_per_message"] < 20:  # an idle gateway's timers: a few ms a second
            break
    total = meter.stop(1)["cpu_ms_per_message"]
    return total


def _request_tokens(llm: FakeLLM, text: str) -> tuple[int, int]:
    """(estimated tokens, bytes on the wire) of the recorded request that asks `text`."""
    record = next(
        r for r in llm.recorded() if any(m.get("content") == text for m in r["body"]["messages"])
    )
    chars = sum(len(str(m.get("content") or "")) for m in record["body"]["messages"])
    return tokens_for_chars(chars), record["wire_bytes"]


async def big_session(count: int = 50_000, later_turns: int = 50) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        home = Path(tmp)
        await filled(home, {"big": (count, 56), **{f"short-{c}": (10, 56) for c in range(5)}})
        async with (
            fake_llm(0.0, home, record=20) as llm,
            gateway_process(shipped_config(llm.base_url), home) as gw,
        ):
            await _warm_turns(gw, "warm-up", 5)
            ws = await connect(gw.ws_url, "big")
            meter = CpuMeter(gw.pid)
            meter.start()
            answered = await ask(ws, "b0", "are you still there?")
            first_cpu = meter.stop(1)
            first = first_cpu["cpu_ms_per_message"]
            tokens, wire = _request_tokens(llm, "are you still there?")
            compaction = await _idle(gw)
            await ws.close()
            short_first = await _first_turns(gw, [f"short-{c}" for c in range(5)])
            # turn by turn with a short chat: in blocks one after the other, the
            # gap between the two moved from 1 to 18 % with the machine's drift
            later = await _interleaved_warm_turns(
                gw, {"big": "big", "short": "short-0"}, later_turns
            )
    return {
        "scenario": "big_session",
        "path": "picobot gateway process, shipped defaults, OpenAI SDK → fake LLM process (HTTP)",
        "messages": count,
        "first_turn_answered_secs": round(answered, 3),
        "first_request_estimated_tokens": tokens,
        "first_request_wire_bytes": wire,
        "window_tokens": WINDOW_TOKENS,
        "first_turn_cpu_ms": first,
        # the storage thread's share is the opening (SQL, rows → messages); the
        # event loop's is mostly building and sending a request of that size
        "first_turn_cpu_ms_by_thread": first_cpu["cpu_ms_per_message_by_thread"],
        "short_chat_first_turn_cpu_ms": short_first,
        "opening_extra_cpu_ms": round(first - short_first, 3),
        "background_compaction_cpu_ms": compaction,
        "later_turn_cpu_ms": later["big"],
        "short_chat_turn_cpu_ms": later["short"],
        "later_vs_short": round(later["big"] / later["short"], 3) if later["short"] else None,
        "targets": {"opening_extra_cpu_ms": 50, "later_vs_short": 1.0},
    }
