"""The catalogue of texts the gateway itself writes to chats, in every language.

Command replies, refusals, failure and late notes: everything a person reads
that the model did not write. Log lines are not here; they stay English.

    tr(Locale.ZH_CN, Msg.SWITCHED, id="telegram:42#2")

Texts are looked up by key (`Msg`) and filled by name (`str.format`
fields, so `{count:,}` and `{name!r}` work). Which locale a message gets is
decided once per inbound message (gateway.i18n.locales) and travels on its
`WorkItem`; code that writes a text takes that locale, never a language
setting of its own.

Adding a text:
  1. a member in `gateway/i18n/keys.py` (`Msg.APPROVE_USAGE = "approve_usage"`);
  2. its text in `gateway/i18n/en.py` AND `gateway/i18n/zh_cn.py`, with the
     same `{placeholders}`;
  3. `tr(locale, Msg.APPROVE_USAGE, ...)` where it is written. A command's
     help is a key too: `Command("approve", Msg.HELP_APPROVE, handler)`.
tests/gateway/test_i18n.py fails while a key lacks a language or the
languages disagree on a placeholder. Adding a language is a new table here.

Public: gateway.i18n, gateway.i18n.keys, gateway.i18n.locales, gateway.i18n.page
May import: gateway.bus, gateway.config
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from gateway.i18n import en, zh_cn
from gateway.i18n.keys import Msg

__all__ = [
    "CATALOGUE",
    "Locale",
    "Msg",
    "catalogue_problems",
    "parse_locale",
    "placeholders",
    "tr",
]


class Locale(StrEnum):
    EN = "en"
    ZH_CN = "zh-CN"


def parse_locale(value: str | None) -> Locale | None:
    """The locale a stored tag names ("zh-CN"); None for none or an unknown one."""
    return next((locale for locale in Locale if locale.value == value), None)


CATALOGUE: Final[Mapping[Locale, Mapping[Msg, str]]] = {
    Locale.EN: en.TEXTS,
    Locale.ZH_CN: zh_cn.TEXTS,
}


def tr(locale: Locale, key: Msg, /, **params: object) -> str:
    """The text of `key` in `locale`, its fields filled from `params`."""
    return CATALOGUE[locale][key].format_map(params)


def placeholders(template: str) -> frozenset[str]:
    """The field names a template fills: {"count", "name"} for "{count:,} {name!r}"."""
    return frozenset(
        field for _, field, _, _ in string.Formatter().parse(template) if field is not None
    )


def catalogue_problems(
    catalogue: Mapping[Locale, Mapping[Msg, str]] = CATALOGUE,
    keys: frozenset[Msg] = frozenset(Msg),
) -> list[str]:
    """Every key missing from a language, unknown to `keys`, or whose
    languages fill different placeholders; [] when the catalogue is whole."""
    problems: list[str] = []
    for locale in Locale:
        table = catalogue.get(locale, {})
        problems += [f"{k.value}: no {locale.value} text" for k in sorted(keys - set(table))]
        problems += [f"{k}: not a key (keys.py)" for k in sorted(set(table) - keys)]
    reference = catalogue.get(Locale.EN, {})
    for key in sorted(keys & set(reference)):
        expected = placeholders(reference[key])
        for locale, table in catalogue.items():
            if key in table and placeholders(table[key]) != expected:
                problems.append(
                    f"{key.value}: {locale.value} fills {sorted(placeholders(table[key]))}, "
                    f"en fills {sorted(expected)}"
                )
    return problems
