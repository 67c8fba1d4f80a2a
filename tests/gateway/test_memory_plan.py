"""The maintenance plan check: what it accepts, and every way it refuses."""

from __future__ import annotations

import json

import pytest

from gateway.memory.plan import InvalidPlan, check_plan
from storage.sql.memory.maintenance import ScopeSnapshot
from storage.sql.memory.memories import MemoryRow, Provenance, Scope


def row(i: int, key: str, updated: str) -> MemoryRow:
    return MemoryRow(i, "n", key, f"content {key}", None, Provenance("agent"), updated, updated)


SNAP = ScopeSnapshot(
    Scope("user", "x:1"),
    7,
    [row(1, "a", "2026-01-01"), row(2, "b", "2026-02-01"), row(3, "c", "2026-03-01")],
)


def ref(key: str) -> dict[str, str]:
    return {"namespace": "n", "memory_key": key}


def test_conflicts_keep_the_newest_whatever_the_model_lists_first() -> None:
    plan = {"conflicts": [{"entries": [ref("c"), ref("a")], "reason": "contradict"}]}
    rewrite = check_plan(json.dumps(plan), SNAP)
    assert [(r.memory_key, r.action, r.replaced_by) for r in rewrite.removals] == [
        ("a", "superseded", "n/c")
    ]


def test_a_merge_into_a_source_key_keeps_that_key() -> None:
    plan = {"merges": [{"sources": [ref("a"), ref("b")], "into": {**ref("b"), "content": "ab"}}]}
    rewrite = check_plan(json.dumps(plan), SNAP)
    assert [r.memory_key for r in rewrite.removals] == ["a"]
    assert [(u.memory_key, u.content) for u in rewrite.upserts] == [("b", "ab")]


@pytest.mark.parametrize(
    "answer",
    [
        "sure, here is the plan",
        json.dumps({"drop": [ref("zzz")]}),  # not an entry of this scope
        json.dumps({"drop": [ref("a")], "conflicts": [{"entries": [ref("a"), ref("b")]}]}),
        json.dumps({"merges": [{"sources": [], "into": {**ref("a"), "content": "x"}}]}),
        json.dumps({"summary_markdown": "x" * 2001}),
        json.dumps({"drop": [{"namespace": "N S", "memory_key": "a"}]}),
        json.dumps({"unknown": 1}),
    ],
)
def test_an_invalid_plan_is_refused_whole(answer: str) -> None:
    with pytest.raises(InvalidPlan):
        check_plan(answer, SNAP)
