"""What an admin types to change a budget, checked the same way for `/limits`
(gateway.spend.commands) and `picobot limits` (gateway.cli.spend). Each
function raises ValueError with a line that says what is wrong."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gateway.config.limits import BUDGET_FIELDS, BudgetField, Scope
from gateway.spend.budget import SCOPES, TOTAL_KEY

__all__ = ["parse_field", "parse_key", "parse_scope", "parse_value", "value_text"]


def parse_scope(text: str) -> Scope:
    for scope in SCOPES:
        if scope == text.lower():
            return scope
    raise ValueError(f"no scope {text!r} (use {', '.join(SCOPES)})")


def parse_field(text: str) -> BudgetField:
    for field in BUDGET_FIELDS:
        if field == text.lower():
            return field
    raise ValueError(f"no budget field {text!r} (use {', '.join(BUDGET_FIELDS)})")


def parse_key(scope: Scope, key: str, agents: Sequence[str] | None) -> str:
    """`key` if it names someone in `scope` ("*": the scope's default);
    `agents`: the names an agent key must be one of (None: any)."""
    if key == TOTAL_KEY:
        return key
    if scope == "total":
        raise ValueError(f'the total scope has one key, "*", not {key!r}')
    if scope in ("sender", "chat"):
        channel, _, who = key.partition(":")
        if not channel or not who:
            raise ValueError(f'{scope} key {key!r} is not channel:id (e.g. telegram:42) or "*"')
    elif agents is not None and key not in agents:
        raise ValueError(f"no agent {key!r} in the config (agents: {', '.join(agents)})")
    return key


def parse_value(field: BudgetField, text: str) -> float | None:
    """A budget's value: "none" (or "null", "off") for no limit; a whole
    number of tokens, or a cost, finite and not negative."""
    if text.lower() in ("none", "null", "off"):
        return None
    kind = "a whole number of tokens" if field.endswith("tokens") else "a cost"
    problem = f"{text!r} is not a budget for {field} ({kind}, or none)"
    try:
        value = float(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise ValueError(problem) from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(problem)
    if field.endswith("tokens") and value != int(value):
        raise ValueError(problem)
    return value


def value_text(field: str, value: float | None) -> str:
    if value is None:
        return "none"
    return f"{int(value):,}" if field.endswith("tokens") else f"{value:g}"
