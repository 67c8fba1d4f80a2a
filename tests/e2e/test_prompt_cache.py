"""Prompt caching through the whole gateway (docs/caching.md).

A 20-turn chat with tool calls (one of them a long file read, trimmed once its
turn is over), one compaction and two re-injections of AGENT.md, against the
caching fakes of both providers (tests/fakes/prompt_cache.py: a "token" is a
word). Measured: the share of input tokens after the first turn that the
service reads from its cache, as it reports them in usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.prompt_file import DEFAULT_AGENT_PROMPT, prompt_text
from gateway.app import Gateway
from storage.sqlite.db import Database
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedLLMServer
from tests.support import make_config, running_gateway, ws_client

TURNS = 20
REINJECT_EVERY = 8  # AGENT.md before user turns 1, 9 and 17: two re-injections
COMPACT_AFTER = 12  # /compact once, after this turn
TOOL_TURNS: dict[int, list[tuple[str, dict[str, Any]]]] = {
    3: [("calculator", {"expression": "17 * 23"})],
    6: [("get_time", {})],
    8: [("read", {"path": "notes.txt"})],  # 4,000+ characters: trimmed in later turns
    11: [("calculator", {"expression": "2 ** 10"}), ("get_time", {})],
    15: [("calculator", {"expression": "(3 + 4) * 5"})],
    18: [("get_time", {})],
}
_VOCABULARY = (
    *("garden", "tomato", "weekend", "plan", "train", "ticket", "budget", "invoice"),
    *("recipe", "coffee", "meeting", "letter", "holiday", "weather", "river", "bicycle"),
    *("library", "chapter", "summary", "reminder"),
)


def _text(seed: int, words: int) -> str:
    return " ".join(_VOCABULARY[(seed * 7 + i * 3) % len(_VOCABULARY)] for i in range(words))


def _question(turn: int) -> str:
    return f"Question {turn}: " + _text(turn, 25 + turn % 4 * 10)


def _answer(turn: int) -> str:
    return f"Answer {turn}: " + _text(turn + 100, 45 + turn % 3 * 15)


async def _summary(body: dict[str, Any]) -> Reply | None:
    if "tools" in body:
        return None  # a turn: the script answers
    return Reply(text="Earlier the user asked about plans and budgets. " + _text(999, 120))


@dataclass(frozen=True, slots=True)
class Session:
    turn_requests: list[dict[str, Any]]  # request bodies of the turns, in order
    usage: list[dict[str, Any]]  # what the fake reported for each of them
    first_turn: int  # how many of them belong to the first turn


async def run_session(gw: Gateway, llm: ScriptedLLMServer) -> Session:
    for turn in range(1, TURNS + 1):
        if turn in TOOL_TURNS:
            llm.add_tool_calls(TOOL_TURNS[turn])
        llm.add_text(_answer(turn))
    llm.responder = _summary
    first_turn = 0
    async with ws_client(gw) as client:
        for turn in range(1, TURNS + 1):
            assert await client.ask(_question(turn)) == _answer(turn)
            if turn == 1:
                first_turn = len(llm.billed)
            if turn == COMPACT_AFTER:
                assert (await client.ask("/compact")).startswith("Compacted:")
    assert llm.pending == 0
    turns = [(body, usage) for body, usage in llm.billed if "tools" in body]
    assert len(turns) == TURNS + sum(1 for _ in TOOL_TURNS)
    return Session([b for b, _ in turns], [u for _, u in turns], first_turn)


def agent_prompt() -> str:
    """A persona of about 760 words: the default one with house rules added.

    The fakes count words, fewer than a real tokenizer finds in the same
    request (tool schemas and punctuation count nothing here), so a prefix
    has to be longer in words than a real one is in tokens to pass the
    services' 1,024-token minimum, as a deployment's tools and prompt do.
    """
    rules = "\n".join(f"- Rule {i}: " + _text(i, 25) for i in range(24))
    return f"{DEFAULT_AGENT_PROMPT}\n## House rules\n\n{rules}\n"


def prepare_home(home: Path) -> None:
    (home / "agent").mkdir()
    (home / "agent" / "AGENT.md").write_text(agent_prompt(), encoding="utf-8")
    workspace = home / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(
        "\n".join(f"note {i}: " + _text(i, 30) for i in range(20)), encoding="utf-8"
    )


def anthropic_config(
    home: Path, fake: FakeAnthropic, *, reinject_every: int = REINJECT_EVERY, **model: Any
) -> Any:
    return make_config(
        home,
        "http://unused.invalid/v1",
        providers={
            "claude": {
                "type": "anthropic",
                "base_url": fake.base_url,
                "api_key": "ak",
                "max_retries": 0,
            }
        },
        models={"sonnet": {"model_id": "claude-test", **model}},
        agents={"default": {"provider": "claude", "model": "sonnet"}},
        gateway={"agent_prompt_reinject_every": reinject_every},
    )


def read_share(session: Session, read: str, total: Callable[[dict[str, Any]], int]) -> float:
    """Cache reads / all input tokens, over the requests after the first turn."""
    after = session.usage[session.first_turn :]
    return sum(_get(u, read) for u in after) / sum(total(u) for u in after)


def _get(usage: dict[str, Any], path: str) -> int:
    value: Any = usage
    for key in path.split("."):
        value = value.get(key, 0) if isinstance(value, dict) else 0
    return int(value)


def _anthropic_total(usage: dict[str, Any]) -> int:
    """Anthropic's input_tokens leaves out what was read from or written to the cache."""
    return sum(
        int(usage.get(key, 0))
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def _same_everywhere(values: list[Any]) -> bool:
    return len({json.dumps(v, sort_keys=True) for v in values}) == 1


def _first_system_block(body: dict[str, Any]) -> Any:
    system = body["system"]
    return system[0] if isinstance(system, list) else system


async def test_anthropic_reads_most_input_from_the_cache(home: Path) -> None:
    prepare_home(home)
    async with FakeAnthropic() as claude, running_gateway(anthropic_config(home, claude)) as gw:
        session = await run_session(gw, claude)
    share = read_share(session, "cache_read_input_tokens", _anthropic_total)
    print(f"\nanthropic: {share:.1%} of input tokens after the first turn read from the cache")
    assert _same_everywhere([_first_system_block(b) for b in session.turn_requests])
    assert _same_everywhere([b["tools"] for b in session.turn_requests])
    assert share >= 0.85


async def test_openai_compatible_reads_most_input_from_the_cache(
    home: Path, llm: FakeOpenAI
) -> None:
    prepare_home(home)
    loaded = make_config(
        home, llm.base_url, gateway={"agent_prompt_reinject_every": REINJECT_EVERY}
    )
    async with running_gateway(loaded) as gw:
        session = await run_session(gw, llm)
    share = read_share(session, "prompt_tokens_details.cached_tokens", lambda u: u["prompt_tokens"])
    print(f"\nopenai: {share:.1%} of input tokens after the first turn read from the cache")
    assert _same_everywhere([b["messages"][0] for b in session.turn_requests])
    assert _same_everywhere([b["tools"] for b in session.turn_requests])
    assert share >= 0.80


PRICES = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


async def test_cache_tokens_are_stored_shown_priced_and_counted(home: Path) -> None:
    prepare_home(home)
    async with FakeAnthropic() as claude:
        loaded = anthropic_config(home, claude, prices=PRICES)
        async with running_gateway(loaded) as gw:
            session = await run_session(gw, claude)
            async with ws_client(gw) as client:
                status = await client.ask("/status")
            metrics = gw.metrics.registry
            counted = {
                kind: metrics.get_sample_value(
                    "picobot_llm_input_tokens_total", {"model": "claude-test", "cache": kind}
                )
                for kind in ("none", "read", "write")
            }
        async with Database(loaded.storage_path) as db:
            stored = await db.read(
                lambda c: c.execute(
                    "SELECT usage FROM messages WHERE role = 'assistant' AND segment = 0 "
                    "ORDER BY seq"
                ).fetchall()
            )
    # every call of the chat, the compaction summary included, as the service billed it
    billed = [usage for _, usage in claude.billed]
    total = sum(_anthropic_total(u) for u in billed)
    read = sum(u["cache_read_input_tokens"] for u in billed)
    written = sum(u["cache_creation_input_tokens"] for u in billed)
    out = sum(u["output_tokens"] for u in billed)
    assert read > 0
    assert written > 0

    # per message: each assistant message keeps its call's reads and writes
    per_message = [json.loads(row["usage"]) for row in stored]
    assert [(u["cache_read_tokens"], u["cache_write_tokens"]) for u in per_message] == [
        (u["cache_read_input_tokens"], u["cache_creation_input_tokens"])
        for u in session.usage[: len(per_message)]
    ]
    assert [u["input_tokens"] for u in per_message] == [
        _anthropic_total(u) for u in session.usage[: len(per_message)]
    ]

    # /status: the session's tokens, the cached share and the cost, by hand
    cost = ((total - read - written) * 3.0 + read * 0.3 + written * 3.75 + out * 15.0) / 1e6
    assert (
        f"Tokens in this session: {total:,} in, {out:,} out; {read / total:.1%} of the input "
        f"read from the prompt cache ({read:,} read, {written:,} written)"
    ) in status
    assert f"Estimated cost: {cost:,.4f} USD (at the prices of claude-test)" in status

    # Prometheus: cached and uncached input tokens
    assert counted == {"none": total - read - written, "read": read, "write": written}


def _first_blocks(llm: FakeAnthropic) -> list[str]:
    return [b["system"][0]["text"] for b in llm.requests if "tools" in b]


async def test_an_edited_agent_prompt_changes_the_first_block_once(home: Path) -> None:
    """The edit goes in near the latest turn at the next re-injection; the
    front of the request changes only when a compaction folds the turn it
    came with and keeps it as the agent prompt."""
    async with FakeAnthropic() as claude:
        claude.responder = _summary
        loaded = anthropic_config(home, claude, reinject_every=3)  # before turns 1, 4, 7
        async with running_gateway(loaded) as gw, ws_client(gw) as client:
            for turn in range(1, 4):
                await client.ask(_question(turn))
            (home / "agent" / "AGENT.md").write_text("You are Pico, edited.", encoding="utf-8")
            for turn in range(4, 8):
                await client.ask(_question(turn))
            before = len(_first_blocks(claude))
            # turns 1-4 are folded: of their agent prompts the latest, the edit, stays
            assert (await client.ask("/compact")).startswith("Compacted:")
            for turn in range(8, 10):
                await client.ask(_question(turn))
    blocks = _first_blocks(claude)
    assert blocks[:before] == [prompt_text(DEFAULT_AGENT_PROMPT)] * before
    assert blocks[before:] == ["You are Pico, edited."] * (len(blocks) - before)
    assert _same_everywhere([b["tools"] for b in claude.requests if "tools" in b])
    # meanwhile the edit reached the model in place, next to turn 4
    turn_four = [b for b in claude.requests if "tools" in b][3]["messages"][-1]["content"]
    assert turn_four[0]["text"] == "<system-reminder>\nYou are Pico, edited.\n</system-reminder>"
