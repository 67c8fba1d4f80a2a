"""Skills through the whole gateway (docs/skills.md): the fake LLM calls the
skill tools with scripted tool calls; the requests it records show the index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skills.index import HEADER
from skills.model import SkillSource
from storage.sqlite.db import Database
from storage.store import Store
from tests.fakes.openai_server import FakeOpenAI
from tests.skills.helpers import SIX, Layout, write_skill
from tests.support import make_config, newest, running_gateway, ws_client

# a SKILL.md written by the test shows in the very next turn
LOOK_EVERY_TURN = {"check_interval_secs": 0}


@pytest.fixture
def lay(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))  # ~/.agents, ~/.openclaw
    return Layout(home, user_home, home / "workspace")


def index_of(body: dict[str, Any]) -> str | None:
    found = [
        m["content"]
        for m in body["messages"]
        if isinstance(m.get("content"), str) and m["content"].startswith(HEADER)
    ]
    assert len(found) <= 1
    return found[0] if found else None


def listed(index: str | None) -> list[str]:
    assert index is not None
    return [line[2:].split(":")[0] for line in index.splitlines() if line.startswith("- ")]


def before_tail(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request up to the end of the history (the cacheable prefix)."""
    messages: list[dict[str, Any]] = body["messages"]
    return messages[: messages.index(newest(body)) + 1]


async def events(home: Path, skill: str | None = None) -> list[tuple[str, str, str | None]]:
    async with Database(home / "storage" / "sessions.db") as db:
        rows = await Store(db).skill_events(skill, 500)
    return [(r.event, r.skill, r.session_id) for r in rows]


async def test_project_openclaw_wins_in_list_index_and_activate(
    home: Path, lay: Layout, llm: FakeOpenAI
) -> None:
    for source in SIX:
        write_skill(lay.skill_dir(source), "demo", f"demo from {source.value}", f"body of {source}")
    llm.add_tool_call("skill_activate", {"name": "demo"})
    llm.add_tool_call("skill_manage", {"action": "list"})
    llm.add_text("done")
    async with (
        running_gateway(make_config(home, llm.base_url, skills=LOOK_EVERY_TURN)) as gw,
        ws_client(gw) as client,
    ):
        assert await client.ask("use demo") == "done"
    index = index_of(llm.requests[0])
    assert index is not None
    assert "- demo: demo from project_openclaw" in index
    assert listed(index).count("demo") == 1
    activated = newest(llm.requests[1])["content"]
    assert "body of project_openclaw" in activated
    assert f"Folder: {lay.skill_dir(SkillSource.PROJECT_OPENCLAW) / 'demo'}" in activated
    listing = newest(llm.requests[2])["content"]
    assert "- demo (project_openclaw): demo from project_openclaw" in listing
    assert "user_agent" not in listing


async def test_index_in_every_request_never_stored_bounded_and_stable(
    home: Path, lay: Layout, llm: FakeOpenAI
) -> None:
    for n in range(40):
        write_skill(lay.skill_dir(SkillSource.USER), f"skill-{n:02d}", f"Skill number {n} " * 6)
    for text in ("one", "two", "three"):
        llm.add_text(f"re {text}")
    async with (
        running_gateway(make_config(home, llm.base_url, skills=LOOK_EVERY_TURN)) as gw,
        ws_client(gw) as client,
    ):
        await client.ask("one")
        await client.ask("two")
        # a new skill on disk while the gateway runs: in the next turn's index
        write_skill(lay.skill_dir(SkillSource.PROJECT_AGENT), "aaa-new", "Brand new skill")
        await client.ask("three")
    first, second, third = llm.requests
    for body in (first, second, third):
        index = index_of(body)
        assert index is not None
        assert len(index) <= 4_000
        assert len(listed(index)) <= 32
        assert "…and" in index
    assert index_of(first) == index_of(second)
    # what comes before the per-turn blocks is repeated byte for byte
    assert json.dumps(before_tail(second)[: len(before_tail(first))]) == json.dumps(
        before_tail(first)
    )
    assert listed(index_of(third))[0] == "aaa-new"
    async with Database(home / "storage" / "sessions.db") as db:
        stored = await db.read(
            lambda c: c.execute(
                "SELECT content FROM messages WHERE content LIKE ?", (HEADER[:20] + "%",)
            ).fetchall()
        )
    assert stored == []


async def test_activate_returns_body_folder_files_and_the_files_are_readable(
    home: Path, lay: Layout, llm: FakeOpenAI
) -> None:
    root = lay.skill_dir(SkillSource.USER_AGENT)  # outside the workspace
    write_skill(root, "helper", "Helps", "Read references/notes.md first.")
    notes = root / "helper" / "references" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("the secret sauce\n")
    llm.add_tool_call("skill_activate", {"name": "helper"})
    llm.add_tool_call("read", {"path": str(notes)})
    llm.add_tool_call("write", {"path": str(notes), "content": "overwritten"})
    llm.add_text("ok")
    async with (
        running_gateway(make_config(home, llm.base_url, skills=LOOK_EVERY_TURN)) as gw,
        ws_client(gw) as client,
    ):
        await client.ask("help me")
    activated = newest(llm.requests[1])["content"]
    assert "Read references/notes.md first." in activated
    assert f"Folder: {root / 'helper'} (read-only)" in activated
    assert f"- {notes}" in activated
    assert "the secret sauce" in newest(llm.requests[2])["content"]
    assert "outside the workspace" in newest(llm.requests[3])["content"]
    assert notes.read_text() == "the secret sauce\n"
    rows = [e for e in await events(home, "helper") if e[0] == "activated"]
    assert rows == [("activated", "helper", "chat-1")]


async def test_batch_disable_writes_the_state_file_reloads_once_and_survives_restart(
    home: Path, lay: Layout, llm: FakeOpenAI
) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_skill(lay.skill_dir(SkillSource.PROJECT), name, f"{name} skill")
    loaded = make_config(home, llm.base_url, skills=LOOK_EVERY_TURN)
    llm.add_tool_call("skill_manage", {"action": "disable", "names": ["alpha", "beta"]})
    llm.add_text("disabled")
    llm.add_tool_call("skill_activate", {"name": "alpha"})
    llm.add_tool_call("skill_manage", {"action": "disable", "scope": "user", "names": ["gamma"]})
    llm.add_text("all off")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        assert gw.skills is not None
        scans = gw.skills.scans
        await client.ask("turn off alpha and beta")
        assert gw.skills.scans == scans + 1  # one reload for the batch
        project_state = lay.project / ".picobot" / "skill-state.json"
        assert json.loads(project_state.read_text()) == {"disabled_skills": ["alpha", "beta"]}
        await client.ask("now gamma")
    user_state = home / "skill-state.json"
    assert json.loads(user_state.read_text()) == {"disabled_skills": ["gamma"]}
    index = index_of(llm.requests[2])
    assert "gamma" in listed(index)
    assert not {"alpha", "beta"} & set(listed(index))
    assert "no skill named 'alpha'" in newest(llm.requests[3])["content"]

    llm.add_tool_call("skill_manage", {"action": "list"})
    llm.add_text("listed")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.ask("what is there?")
    after = llm.requests[-2:]
    assert not {"alpha", "beta", "gamma"} & set(listed(index_of(after[0])))
    listing = newest(after[1])["content"]
    assert "- alpha" not in listing
    assert "Disabled: alpha, beta, gamma" in listing
    kinds = [(e[0], e[1]) for e in await events(home) if e[0] == "disabled"]
    assert kinds == [("disabled", "alpha"), ("disabled", "beta"), ("disabled", "gamma")]


async def test_create_update_delete_round_trip_and_builtin_writes_are_refused(
    home: Path, lay: Layout, llm: FakeOpenAI
) -> None:
    path = lay.skill_dir(SkillSource.PROJECT) / "notes-x" / "SKILL.md"
    create = {"action": "create", "name": "notes-x", "description": "Take notes", "body": "v1"}
    steps: list[dict[str, Any]] = [
        create,
        {"action": "update", "name": "notes-x", "body": "v2"},
        {"action": "delete", "name": "notes-x"},
        {"action": "update", "name": "reminders", "body": "mine now"},
        {"action": "delete", "name": "skill-creator"},
        {"action": "create", "name": "no-desc", "body": "x"},
        {"action": "create", "name": "Bad Name", "description": "d"},
    ]
    for args in steps:
        llm.add_tool_call("skill_manage", args)
        llm.add_text("ok")
    results: list[str] = []
    on_disk: list[str | None] = []
    async with (
        running_gateway(make_config(home, llm.base_url, skills=LOOK_EVERY_TURN)) as gw,
        ws_client(gw) as client,
    ):
        for _ in steps:
            await client.ask("do it")
            results.append(newest(llm.requests[-1])["content"])
            on_disk.append(path.read_text() if path.exists() else None)
    assert on_disk[0] is not None
    assert "description: Take notes" in on_disk[0]
    assert on_disk[0].endswith("v1\n")
    assert on_disk[1] is not None
    assert on_disk[1].endswith("v2\n")
    assert on_disk[2] is None
    assert "built in and read-only" in results[3]
    assert "built in and read-only" in results[4]
    assert "needs a 'description'" in results[5]
    assert "lowercase letters" in results[6]
    # the index of the turn after create lists it, the one after delete not
    assert "notes-x" in listed(index_of(llm.requests[2]))
    assert "notes-x" not in listed(index_of(llm.requests[6]))
    kinds = [e[0] for e in await events(home, "notes-x")]
    assert kinds == ["created", "discovered", "updated", "discovered", "deleted"]


async def test_skills_disabled_means_no_index_and_no_tools(
    home: Path, lay: Layout, llm: FakeOpenAI
) -> None:
    write_skill(lay.skill_dir(SkillSource.USER), "demo", "a demo")
    llm.add_text("hi")
    loaded = make_config(home, llm.base_url, skills={"enabled": False})
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.ask("hello")
    body = llm.requests[0]
    assert index_of(body) is None
    names = {t["function"]["name"] for t in body["tools"]}
    assert not {"skill_activate", "skill_manage"} & names
