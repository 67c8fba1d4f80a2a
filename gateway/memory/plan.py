"""Memory maintenance's plan: the prompt, the JSON the model must answer
with, and the check that turns an answer into a storage `Rewrite`.

An answer that is not that JSON, names an entry the scope does not hold,
uses one entry twice, or breaks a limit is refused whole (`InvalidPlan`):
maintenance then changes nothing for that scope. Conflicts are resolved by
age, not by the model: of the entries in a conflict the newest is kept and
the others are superseded (copied to the audit trail, then removed).
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.memory.types import KEY_PATTERN, MAX_CONTENT_CHARS
from storage.sql.memory.maintenance import Removal, Rewrite, ScopeSnapshot, Upsert

__all__ = ["MAX_SUMMARY_CHARS", "PLAN_INSTRUCTIONS", "InvalidPlan", "check_plan", "plan_request"]

MAX_SUMMARY_CHARS: Final = 2_000

PLAN_INSTRUCTIONS: Final = f"""\
You maintain the long-term memory a chat assistant keeps about one user. You get \
every entry as JSON. Answer with ONE JSON object and nothing else:
{{"entries": [{{"namespace": str, "memory_key": str, "category": "fact" | "preference" | \
"behaviour" | "other"}}],
 "merges": [{{"sources": [{{"namespace": str, "memory_key": str}}], \
"into": {{"namespace": str, "memory_key": str, "content": str}}, "reason": str}}],
 "conflicts": [{{"entries": [{{"namespace": str, "memory_key": str}}], "reason": str}}],
 "drop": [{{"namespace": str, "memory_key": str, "reason": str}}],
 "summary_markdown": str}}
- entries: a category for every entry you keep.
- merges: duplicates or entries that say the same thing, merged into one (into may reuse \
one of the sources' keys); keep every fact the sources hold.
- conflicts: entries that contradict each other; the newest is kept, the rest removed.
- drop: entries of little long-term value (small talk, one-off details, stale tasks).
- summary_markdown: at most {MAX_SUMMARY_CHARS} characters, a few short bullet points of \
what matters most about this user (language, preferences, identity, ongoing work).
Use only namespaces and keys matching {KEY_PATTERN}; contents at most {MAX_CONTENT_CHARS} \
characters. Never invent facts."""


class InvalidPlan(ValueError):
    """The model's answer is not a usable plan; the message says why (for the log)."""


class Category(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    BEHAVIOUR = "behaviour"
    OTHER = "other"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Ref(_Model):
    namespace: str = Field(pattern=f"^{KEY_PATTERN}$")
    memory_key: str = Field(pattern=f"^{KEY_PATTERN}$")


class Classified(Ref):
    category: Category


class Merged(Ref):
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)


class Merge(_Model):
    sources: list[Ref] = Field(min_length=1)
    into: Merged
    reason: str = ""


class Conflict(_Model):
    entries: list[Ref] = Field(min_length=2)
    reason: str = ""


class Drop(Ref):
    reason: str = ""


class Plan(_Model):
    entries: list[Classified] = Field(default_factory=list)
    merges: list[Merge] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    drop: list[Drop] = Field(default_factory=list)
    summary_markdown: str = Field("", max_length=MAX_SUMMARY_CHARS)


def plan_request(snapshot: ScopeSnapshot) -> str:
    """The user message: the scope's entries, oldest first."""
    entries = [
        {
            "namespace": r.namespace,
            "memory_key": r.memory_key,
            "content": r.content,
            "updated_at": r.updated_at,
            "source_type": r.source.source_type,
        }
        for r in snapshot.rows
    ]
    return json.dumps({"entries": entries}, ensure_ascii=False)


_FENCE: Final = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _parse(answer: str) -> Plan:
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return Plan.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidPlan(f"not a plan: {exc.error_count()} problem(s), first: "
                          f"{exc.errors()[0]['msg']}") from None  # fmt: skip


def check_plan(answer: str, snapshot: ScopeSnapshot) -> Rewrite:
    plan = _parse(answer)
    rows = {(r.namespace, r.memory_key): r for r in snapshot.rows}
    used: set[tuple[str, str]] = set()

    def take(ref: Ref, what: str) -> tuple[str, str]:
        key = (ref.namespace, ref.memory_key)
        if key not in rows:
            raise InvalidPlan(f"{what} names {key[0]}/{key[1]}, which this user has no entry for")
        if key in used:
            raise InvalidPlan(f"{what} uses {key[0]}/{key[1]}, already used elsewhere in the plan")
        used.add(key)
        return key

    removals: list[Removal] = []
    upserts: list[Upsert] = []
    categories = {(c.namespace, c.memory_key): c.category.value for c in plan.entries}
    for merge in plan.merges:
        target = (merge.into.namespace, merge.into.memory_key)
        sources = [take(ref, "a merge") for ref in merge.sources]
        if target not in sources and target in rows:
            take(merge.into, "a merge's target")
        into = f"{target[0]}/{target[1]}"
        removals += [
            Removal(ns, key, "merged", merge.reason, into)
            for ns, key in sources
            if (ns, key) != target
        ]
        upserts.append(Upsert(*target, merge.into.content, categories.get(target)))
    for conflict in plan.conflicts:
        group = sorted((take(ref, "a conflict") for ref in conflict.entries),
                       key=lambda k: (rows[k].updated_at, rows[k].id))  # fmt: skip
        newest = group[-1]
        winner = f"{newest[0]}/{newest[1]}"
        removals += [
            Removal(ns, key, "superseded", conflict.reason, winner) for ns, key in group[:-1]
        ]
    for drop in plan.drop:
        removals.append(Removal(*take(drop, "drop"), "dropped", drop.reason))
    removed = {(r.namespace, r.memory_key) for r in removals}
    kept = [(k, c) for k, c in categories.items() if k in rows and k not in removed]
    return Rewrite(
        upserts=upserts,
        removals=removals,
        categories=[(ns, key, c) for (ns, key), c in kept],
        summary=plan.summary_markdown.strip(),
    )
