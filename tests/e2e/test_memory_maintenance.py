"""Memory maintenance through a real gateway: `picobot jobs run
builtin.memory_maintenance_daily` with a plan the fake LLM scripts, the
AGENT.md block, the summary in the next private session, and the failures
(timeout, malformed plan) that must change nothing while chats go on."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.cli.jobs import add_jobs_parser, run_jobs_command
from gateway.config.loading import LoadedConfig
from storage.sql.memory.memories import Provenance, Scope
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import make_config, running_gateway, ws_client

JOB = "builtin.memory_maintenance_daily"
ALICE, BOB = Scope("user", "websocket:alice"), Scope("user", "websocket:bob")
USER_TEXT = "# My persona\n\nBe kind.\n"
SEEDED = {
    ALICE: [
        ("preferences", "language-1", "prefers Chinese"),
        ("preferences", "language-2", "prefers replies in Chinese"),
        ("other", "smalltalk", "said hello once"),
    ],
    BOB: [("profile", "city", "lives in Oslo")],
}
PLANS = {
    "language-1": {
        "entries": [{"namespace": "preferences", "memory_key": "language", "category": "preference"}],
        "merges": [
            {
                "sources": [
                    {"namespace": "preferences", "memory_key": "language-1"},
                    {"namespace": "preferences", "memory_key": "language-2"},
                ],
                "into": {"namespace": "preferences", "memory_key": "language",
                         "content": "prefers replies in Chinese"},
                "reason": "duplicates",
            }
        ],
        "drop": [{"namespace": "other", "memory_key": "smalltalk", "reason": "small talk"}],
        "summary_markdown": "- Prefers replies in Chinese (ALICE-SUMMARY)",
    },
    "city": {"summary_markdown": "- Lives in Oslo (BOB-SUMMARY)"},
}  # fmt: skip


def config(home: Path, llm: FakeOpenAI, timeout_secs: float = 600) -> LoadedConfig:
    return make_config(
        home,
        llm.base_url,
        providers={"default": {"memory_maintenance_timeout_secs": timeout_secs}},
        scheduler={"tick_resolution_ms": 10, "rescan_interval_secs": 0.05},
    )


def is_maintenance(body: dict[str, Any]) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and "long-term memory" in str(first["content"])


def scripted_plan(body: dict[str, Any]) -> Reply:
    entries = json.loads(body["messages"][1]["content"])["entries"]
    plan = next(PLANS[e["memory_key"]] for e in entries if e["memory_key"] in PLANS)
    return Reply(text="```json\n" + json.dumps(plan) + "\n```")


async def seed(gw: Gateway) -> None:
    assert gw.store is not None
    for scope, rows in SEEDED.items():
        for namespace, key, content in rows:
            await gw.store.memories.put(
                scope, namespace, key, content, Provenance("agent"), cap=None
            )


async def run_job(gw: Gateway, loaded: LoadedConfig) -> None:
    parser = argparse.ArgumentParser(prog="picobot")
    add_jobs_parser(parser.add_subparsers(dest="command"))
    assert await run_jobs_command(parser.parse_args(["jobs", "run", JOB]), loaded) == 0


async def last_run(gw: Gateway) -> str:
    assert gw.db is not None
    row = await gw.db.read(
        lambda c: c.execute(
            "SELECT status FROM job_runs WHERE job_id = ? ORDER BY id DESC", (JOB,)
        ).fetchone()
    )
    return str(row[0])


async def state(gw: Gateway) -> dict[Scope, list[tuple[str, str, str, str]]]:
    assert gw.store is not None
    return {
        scope: sorted(
            (r.namespace, r.memory_key, r.content, r.source.source_type)
            for r in await gw.store.memories.entries(scope, None)
        )
        for scope in (ALICE, BOB)
    }


def agent_md(loaded: LoadedConfig) -> Path:
    path = loaded.agent_dir / "AGENT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def planned(home: Path, llm: FakeOpenAI) -> LoadedConfig:
    """A config whose fake LLM answers maintenance with the scripted plans."""
    loaded = config(home, llm)
    agent_md(loaded).write_text(USER_TEXT, encoding="utf-8")

    async def respond(body: dict[str, Any]) -> Reply | None:
        return scripted_plan(body) if is_maintenance(body) else None

    llm.responder = respond
    return loaded


async def maintain(gw: Gateway, loaded: LoadedConfig, llm: FakeOpenAI) -> None:
    """Seed both users, `picobot jobs run` the job, wait for the run to end."""
    await seed(gw)
    await run_job(gw, loaded)
    await llm.wait_requests(2)  # one plan per changed scope: the run is in flight
    assert gw.scheduler is not None
    await gw.scheduler.wait_idle()


async def test_a_scripted_plan_merges_drops_and_writes_the_summaries(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = planned(home, llm)
    async with running_gateway(loaded) as gw:
        await maintain(gw, loaded, llm)
        assert await last_run(gw) == "succeeded"
        after = await state(gw)
        assert after[ALICE] == [
            ("preferences", "language", "prefers replies in Chinese", "memory_maintenance")
        ]
        assert after[BOB] == [("profile", "city", "lives in Oslo", "agent")]
        assert gw.db is not None
        audit = await gw.db.read(
            lambda c: c.execute("SELECT memory_key, action FROM memory_audit ORDER BY 1").fetchall()
        )
        assert [tuple(r) for r in audit] == [
            ("language-1", "merged"), ("language-2", "merged"), ("smalltalk", "dropped")
        ]  # fmt: skip
        text = agent_md(loaded).read_text(encoding="utf-8")
        assert text.startswith(USER_TEXT)  # the operator's bytes, unchanged
        assert "ALICE-SUMMARY" in text
        assert "BOB-SUMMARY" in text

        llm.responder = None
        seen = {}
        for user in ("alice", "bob"):
            before = len(llm.requests)
            async with ws_client(gw, user) as client:
                await client.ask("hello")
            seen[user] = json.dumps(llm.requests[before:], ensure_ascii=False)
        assert "ALICE-SUMMARY" in seen["alice"]
        assert "BOB-SUMMARY" not in seen["alice"]
        assert "BOB-SUMMARY" in seen["bob"]
        assert "ALICE-SUMMARY" not in seen["bob"]

        # maintained scopes are not looked at again until they change
        assert await gw.store.memories.changed_scopes() == []
        # each plan was charged to the user whose memory it tidied (gateway.spend)
        payers = await gw.db.read(
            lambda c: c.execute(
                "SELECT channel, chat_id, sender_id FROM usage_log WHERE kind = 'memory' "
                "ORDER BY sender_id"
            ).fetchall()
        )
        assert [f"{r[0]}:{r[2]}" for r in payers] == sorted([ALICE.key, BOB.key])
        assert {r[1] for r in payers} == {""}


async def test_a_malformed_plan_or_a_timeout_changes_nothing_and_chats_go_on(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = config(home, llm, timeout_secs=0.3)
    agent_md(loaded).write_text(USER_TEXT, encoding="utf-8")
    stuck = asyncio.Event()
    mode = {"plan": "malformed"}

    async def respond(body: dict[str, Any]) -> Reply | None:
        if not is_maintenance(body):
            return None
        if mode["plan"] == "malformed":
            return Reply(text='{"merges": [{"sources": "not a list"}]}')
        await stuck.wait()  # past the maintenance timeout
        return scripted_plan(body)

    llm.responder = respond
    async with running_gateway(loaded) as gw:
        await seed(gw)
        before = await state(gw)
        assert gw.scheduler is not None
        for plan in ("malformed", "slow"):
            mode["plan"] = plan
            asked = len(llm.requests)
            await run_job(gw, loaded)
            await llm.wait_requests(asked + 1)
            async with ws_client(gw, "carol") as client:  # answered while maintenance waits
                assert await client.ask(f"still there? {plan}") == f"echo: still there? {plan}"
            await gw.scheduler.wait_idle()
            assert await last_run(gw) == "failed"
            assert await state(gw) == before
            assert agent_md(loaded).read_text(encoding="utf-8") == USER_TEXT
        stuck.set()


async def test_memory_shows_and_forget_all_empties_the_scope_and_its_summary(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = planned(home, llm)
    async with running_gateway(loaded) as gw:
        await maintain(gw, loaded, llm)
        async with ws_client(gw, "alice") as alice:
            shown = await alice.ask("/memory")
            assert "preferences/language: prefers replies in Chinese" in shown
            assert "ALICE-SUMMARY" in shown
            assert "Oslo" not in shown
            assert await alice.ask("/forget preferences/nope") == (
                "I have no memory preferences/nope about you."
            )
            assert (await alice.ask("/forget all")).startswith("Forgot everything about you (1 ")
            assert await alice.ask("/memory") == "I keep no memories about you."
        after = await state(gw)
        assert after[ALICE] == []
        assert after[BOB] == [("profile", "city", "lives in Oslo", "agent")]
        text = agent_md(loaded).read_text(encoding="utf-8")
        assert text.startswith(USER_TEXT)
        assert "ALICE-SUMMARY" not in text
        assert "BOB-SUMMARY" in text
        assert gw.db is not None
        audit = await gw.db.read(
            lambda c: c.execute("SELECT count(*) FROM memory_audit").fetchone()
        )
        assert audit[0] == 0  # the audit trail of the forgotten scope went too
