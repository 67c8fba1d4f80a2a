"""The web UI's own texts, in every language of the catalogue.

The page's texts live beside the chat texts, as JSON (the page reads them as
is): one file per part of the page in gateway/i18n/web/, each
`{"en": {key: text}, "zh-CN": {key: text}}`. Keys are dotted by part
("console.usage.title"); placeholders are plain `{name}` fields, filled by
the page's `t(key, {name})` (js/i18n.js). The gateway serves one merged
table per language at `/i18n/<locale>.json` (no data, no token).

tests/gateway/test_i18n.py fails while a key lacks a language, two files
define one key, or the languages disagree on a placeholder.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import orjson

from gateway.i18n import Locale

__all__ = ["TEXTS_DIR", "page_problems", "page_table", "page_texts"]

TEXTS_DIR: Final = Path(__file__).resolve().parent / "web"
_FIELD: Final = re.compile(r"\{(\w+)\}")


def _files(root: Path) -> list[tuple[str, dict[str, dict[str, str]]]]:
    return [(path.name, orjson.loads(path.read_bytes())) for path in sorted(root.glob("*.json"))]


def _merge(root: Path) -> tuple[dict[Locale, dict[str, str]], list[str]]:
    texts: dict[Locale, dict[str, str]] = {locale: {} for locale in Locale}
    problems: list[str] = []
    owner: dict[str, str] = {}
    for name, tables in _files(root):
        for tag in tables:
            if tag not in {locale.value for locale in Locale}:
                problems.append(f"{name}: {tag!r} is not a language of the catalogue")
        for locale in Locale:
            for key, text in tables.get(locale.value, {}).items():
                if owner.setdefault(f"{locale.value}/{key}", name) != name:
                    problems.append(f"{key}: in {owner[f'{locale.value}/{key}']} and {name}")
                texts[locale][key] = text
    return texts, problems


@functools.cache
def page_texts(root: Path = TEXTS_DIR) -> Mapping[Locale, Mapping[str, str]]:
    """Every page text by language (read once)."""
    return _merge(root)[0]


@functools.cache
def page_table(locale: Locale, root: Path = TEXTS_DIR) -> bytes:
    """The texts of one language as the JSON the page loads."""
    return orjson.dumps(page_texts(root)[locale], option=orjson.OPT_SORT_KEYS)


def page_problems(root: Path = TEXTS_DIR) -> list[str]:
    """Every key missing from a language, defined twice, or filled with
    different placeholders; [] when the page's texts are whole."""
    texts, problems = _merge(root)
    keys = set().union(*texts.values())
    for locale in Locale:
        problems += [f"{k}: no {locale.value} text" for k in sorted(keys - set(texts[locale]))]
    for key in sorted(keys):
        fields = {
            locale: frozenset(_FIELD.findall(table[key]))
            for locale, table in texts.items()
            if key in table
        }
        if len(set(fields.values())) > 1:
            shown = ", ".join(f"{loc.value} {sorted(f)}" for loc, f in fields.items())
            problems.append(f"{key}: the languages fill different fields ({shown})")
    return problems
