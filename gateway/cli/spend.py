"""`picobot usage` and `picobot limits list|set|clear`: what the models cost
and the budgets that stop them (docs/limits.md#budgets), straight on the database.

`usage` reports the usage log by local day (`time.timezone`), agent and
model. `limits` lists every budget of the config file and every one set at
run time, and sets or clears the run-time ones through the same
`Budgets.set` and `Budgets.clear` as the chat's /limits, recorded as set by
"cli". Works whether or not the gateway runs: a running gateway reads the
stored budgets every few seconds (gateway.spend.budget.STORED_TTL_SECS), so a
change counts within that.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from gateway.config.limits import BUDGET_FIELDS, Budget, BudgetField, LimitsConfig, Scope
from gateway.config.loading import LoadedConfig
from gateway.spend.budget import SCOPES, TOTAL_KEY, Budgets
from gateway.spend.parsing import parse_field, parse_key, parse_scope, parse_value, value_text
from gateway.spend.payer import local_days
from storage.backends import open_database
from storage.clock import parse_iso
from storage.sql.spend import Override, UsageDay
from storage.store import Store

__all__ = [
    "CLI",
    "add_limits_parser",
    "add_usage_parser",
    "run_limits_command",
    "run_usage_command",
]

CLI = "cli"  # set_by of the budgets this command sets
APPLIES = "a running gateway applies the change within 5 s"

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class BadArgument(ValueError):
    """An argument the command refuses: one line on stderr, exit 2."""


def _refuse(problem: str) -> int:
    print(f"error: {problem}", file=sys.stderr)
    return 2


# -- parsers ------------------------------------------------------------------------------


def add_usage_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    usage = with_config(
        subparsers.add_parser("usage", help="model calls, tokens and cost by day, agent and model")
    )
    usage.add_argument(
        "--days", type=int, default=30, help="the last N local days, today included (default 30)"
    )
    usage.add_argument("--user", metavar="CHANNEL:SENDER_ID", help="only this sender's calls")
    usage.add_argument("--json", action="store_true", help="print a JSON list of rows")


def _with_config(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--config on `limits` and on each of its commands; given on either, it
    is kept (argparse would let a command's default None replace the one
    given before it)."""
    parser.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help="config file (default: $PICOBOT_HOME/config.json, then ./config.json)",
    )
    return parser


def add_limits_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    """`with_config` is not used: see `_with_config`."""
    limits = _with_config(
        subparsers.add_parser("limits", help="budgets from the config and set at run time")
    )
    commands = limits.add_subparsers(dest="limits_command", metavar="COMMAND")  # none: list
    _with_config(commands.add_parser("list", help="every budget and where it comes from"))
    budget = "sender, chat, agent or total"
    key = 'channel:id (sender, chat), an agent name, or "*" (the scope\'s default; total: "*")'
    fields = ", ".join(BUDGET_FIELDS)
    setting = _with_config(commands.add_parser("set", help="store a budget (wins over the file)"))
    setting.add_argument("scope", help=budget)
    setting.add_argument("key", help=key)
    setting.add_argument("field", help=fields)
    setting.add_argument("value", help='tokens (a whole number), a cost, or "none": no limit')
    clearing = _with_config(
        commands.add_parser("clear", help="drop stored budgets: the file's apply again")
    )
    clearing.add_argument("scope", help=budget)
    clearing.add_argument("key", help=key)
    clearing.add_argument("field", nargs="?", help=f"{fields} (default: every field)")


# -- picobot usage ------------------------------------------------------------------------

_NUMBERS = ("calls", "input", "output", "cache read", "cache write", "cost")


def _usage_cells(day: str, agent: str, model: str, row: UsageDay) -> list[str]:
    counts = (
        row.calls,
        row.input_tokens,
        row.output_tokens,
        row.cache_read_tokens,
        row.cache_write_tokens,
    )
    return [day, agent, model, *(f"{n:,}" for n in counts), f"{row.cost:.4f}"]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numbers: range) -> list[str]:
    """Columns as wide as their widest cell; those in `numbers` aligned right."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(
            cell.rjust(w) if i in numbers else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in (header, *rows)
    ]


def _sum(rows: Sequence[UsageDay]) -> UsageDay:
    return UsageDay(
        "",
        "",
        "",
        sum(r.calls for r in rows),
        sum(r.input_tokens for r in rows),
        sum(r.output_tokens for r in rows),
        sum(r.cache_read_tokens for r in rows),
        sum(r.cache_write_tokens for r in rows),
        sum(r.cost for r in rows),
    )


def _who(text: str) -> tuple[str, str]:
    channel, _, sender = text.partition(":")
    if not channel or not sender:
        raise BadArgument(f"--user {text!r} is not CHANNEL:SENDER_ID (e.g. telegram:42)")
    return channel, sender


async def run_usage_command(
    args: argparse.Namespace, loaded: LoadedConfig, now: Clock = _utc_now
) -> int:
    try:
        if args.days < 1:
            raise BadArgument(f"--days {args.days}: give 1 or more")
        channel, sender = _who(args.user) if args.user else (None, None)
    except BadArgument as exc:
        return _refuse(str(exc))
    zone = loaded.config.time.zone
    since = local_days(now(), zone, args.days)[0].isoformat()
    async with open_database(loaded.storage_url) as db:
        rows = await Store(db).spend.usage_days(since, channel=channel, sender_id=sender)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2, ensure_ascii=False))
        return 0
    span = f"the last {args.days} day{'s' if args.days > 1 else ''} (since {since}, {zone.key})"
    whose = f" for {args.user}" if args.user else ""
    if not rows:
        print(f"no model calls were recorded{whose} in {span}")
        return 0
    print(f"model calls{whose} in {span}")
    cells = [_usage_cells(r.day, r.agent, r.model, r) for r in rows]
    cells.append(_usage_cells("total", "", "", _sum(rows)))
    for line in _table(("day", "agent", "model", *_NUMBERS), cells, range(3, 9)):
        print(line)
    return 0


# -- picobot limits -----------------------------------------------------------------------


def _value_text(field: str, value: float | None) -> str:
    text = value_text(field, value)
    return "none (no limit)" if value is None else text


FileRow = tuple[Scope, str, BudgetField, float | None, str]  # scope, key, field, value, source


def _file_rows(limits: LimitsConfig) -> list[FileRow]:
    """Every budget the config file sets ("*": a scope's default)."""
    found: list[FileRow] = []
    for scope in SCOPES:
        found += [
            (scope, TOTAL_KEY, name, value, f"file: limits.{scope}")
            for name, value in limits.defaults(scope).values().items()
            if value is not None
        ]
    own: tuple[tuple[Scope, str, dict[str, Budget]], ...] = (
        ("sender", "users", limits.users),
        ("chat", "chats", limits.chats),
    )
    for scope, where, budgets in own:
        for key, budget in sorted(budgets.items()):
            found += [
                (scope, key, name, getattr(budget, name), f"file: limits.{where}")
                for name in BUDGET_FIELDS
                if name in budget.model_fields_set  # an explicit null: no limit for them
            ]
    return found


def _order(scope: str, key: str, field: str, stored: bool) -> tuple[int, bool, str, int, bool]:
    """Scope, its default first, key, field, the file's before the stored one."""
    known = BUDGET_FIELDS.index(field) if field in BUDGET_FIELDS else len(BUDGET_FIELDS)
    rank = SCOPES.index(scope) if scope in SCOPES else len(SCOPES)
    return rank, key != TOTAL_KEY, key, known, stored


def _listing(file: Sequence[FileRow], stored: Sequence[Override], zone: ZoneInfo) -> list[str]:
    replaced = {(o.scope, o.key, o.field) for o in stored}
    rows: list[tuple[tuple[int, bool, str, int, bool], list[str]]] = []
    for scope, key, field, value, source in file:
        if (scope, key, field) in replaced:
            source += " (the stored one wins)"
        cells = [scope, key, field, _value_text(field, value), source]
        rows.append((_order(scope, key, field, False), cells))
    for o in stored:
        at = parse_iso(o.set_at).astimezone(zone)
        source = f"stored: set by {o.set_by} at {at:%Y-%m-%d %H:%M}"
        cells = [o.scope, o.key, o.field, _value_text(o.field, o.value), source]
        rows.append((_order(o.scope, o.key, o.field, True), cells))
    rows.sort(key=lambda r: r[0])
    return _table(("scope", "key", "field", "value", "from"), [r[1] for r in rows], range(3, 4))


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """What `limits set` or `limits clear` was asked to change."""

    scope: Scope
    key: str
    field: BudgetField | None  # clear: None for every field
    value: float | None = None  # set: None for no limit

    @classmethod
    def parse(cls, args: argparse.Namespace, agents: Sequence[str]) -> Change:
        """Raises ValueError (gateway.spend.parsing). A budget is set only for a
        configured agent; a stored one may be cleared whatever its key."""
        setting = args.limits_command == "set"
        scope = parse_scope(args.scope)
        field = None if args.field is None else parse_field(args.field)
        key = parse_key(scope, args.key, agents if setting else None)
        if not setting or field is None:
            return cls(scope, key, field)
        return cls(scope, key, field, parse_value(field, args.value))

    @property
    def what(self) -> str:
        every = self.key == TOTAL_KEY and self.scope != "total"
        who = f"{self.key} (every {self.scope}'s default)" if every else self.key
        return " ".join(x for x in (self.scope, who, self.field) if x)


async def _list(store: Store, loaded: LoadedConfig) -> int:
    config = loaded.config
    file = _file_rows(config.limits)
    stored = await store.spend.overrides()
    if not file and not stored:
        print("no budgets in the config file or stored: nothing is limited")
        return 0
    for line in _listing(file, stored, config.time.zone):
        print(line)
    print(
        f"key {TOTAL_KEY}: the scope's default; a stored budget wins over the file's; "
        f"times in {config.time.zone.key}"
    )
    return 0


async def run_limits_command(
    args: argparse.Namespace, loaded: LoadedConfig, now: Clock = _utc_now
) -> int:
    config = loaded.config
    change = None
    if args.limits_command in ("set", "clear"):
        try:
            change = Change.parse(args, list(config.agents))
        except ValueError as exc:
            return _refuse(str(exc))
    async with open_database(loaded.storage_url) as db:
        store = Store(db)
        if change is None:
            return await _list(store, loaded)
        budgets = Budgets(store, config.limits, config.time.zone, now)  # no notices
        if args.limits_command == "set":
            assert change.field is not None
            await budgets.set(change.scope, change.key, change.field, change.value, CLI)
            value = _value_text(change.field, change.value)
            print(f"set {change.what} = {value} (stored, set by {CLI}); {APPLIES}")
            return 0
        count = await budgets.clear(change.scope, change.key, change.field, CLI)
    if not count:
        print(f"no stored budget for {change.what}: nothing to clear")
        return 1
    plural = "s" if count > 1 else ""
    print(f"cleared {count} stored budget{plural} of {change.what}; {APPLIES}")
    return 0
