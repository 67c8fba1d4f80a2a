"""The catalogue of the gateway's own texts: every key in every language, with
the same placeholders, and a text looked up by key and filled by name; the
web UI's texts (gateway/i18n/web/) held to the same rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.i18n import CATALOGUE, Locale, Msg, catalogue_problems, placeholders, tr
from gateway.i18n.keys import Msg as KeyList
from gateway.i18n.page import page_problems, page_texts


def test_every_key_has_a_text_in_every_language() -> None:
    assert catalogue_problems() == []
    assert set(Locale) == set(CATALOGUE)


def test_a_planted_key_with_only_one_language_fails_the_check() -> None:
    planted = {Locale.EN: {**CATALOGUE[Locale.EN]}, Locale.ZH_CN: {**CATALOGUE[Locale.ZH_CN]}}
    del planted[Locale.ZH_CN][Msg.NOTHING_RUNNING]  # an English-only key
    assert catalogue_problems(planted) == ["nothing_running: no zh-CN text"]


def test_a_planted_text_unknown_to_the_keys_fails_the_check() -> None:
    planted = {loc: {**table} for loc, table in CATALOGUE.items()}
    keys = frozenset(Msg) - {Msg.BUSY}  # as if the key were only in the tables
    assert catalogue_problems(planted, keys) == [
        "busy: not a key (keys.py)",
        "busy: not a key (keys.py)",
    ]


def test_languages_that_fill_different_placeholders_fail_the_check() -> None:
    planted = {loc: {**table} for loc, table in CATALOGUE.items()}
    planted[Locale.ZH_CN][Msg.SWITCHED] = "已切换到会话 {session}。"
    assert catalogue_problems(planted) == ["switched: zh-CN fills ['session'], en fills ['id']"]


def test_texts_are_looked_up_by_key_and_filled_by_name() -> None:
    assert tr(Locale.EN, Msg.SWITCHED, id="telegram:42#2") == "Switched to session telegram:42#2."
    assert tr(Locale.ZH_CN, Msg.SWITCHED, id="telegram:42#2") == "已切换到会话 telegram:42#2。"
    assert tr(Locale.ZH_CN, Msg.MEMORY_HEADER, count=3) == "我记得关于你的 3 件事："
    with pytest.raises(KeyError):
        tr(Locale.EN, Msg.SWITCHED)  # a missing parameter is a bug, not an empty field


def test_placeholders_ignore_format_specs_and_conversions() -> None:
    assert placeholders("{count:,} of {name!r} {{literal}}") == {"count", "name"}


def test_the_chinese_texts_are_translations() -> None:
    """A copy of the English table would pass the key check; this would not."""
    same = [k for k in KeyList if CATALOGUE[Locale.ZH_CN][k] == CATALOGUE[Locale.EN][k]]
    assert same == [Msg.HELP_LINE]  # "/{name} — {help}": nothing to translate


def test_the_page_texts_are_whole() -> None:
    assert page_problems() == []
    assert page_texts()[Locale.ZH_CN]["nav.console"] != page_texts()[Locale.EN]["nav.console"]


def test_planted_page_texts_that_disagree_fail_the_check(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(
        json.dumps({"en": {"x.one": "One {n}", "x.two": "Two"}, "zh-CN": {"x.one": "一"}})
    )
    (tmp_path / "b.json").write_text(json.dumps({"en": {"x.two": "Again"}, "fr": {}}))
    assert page_problems(tmp_path) == [
        "b.json: 'fr' is not a language of the catalogue",
        "x.two: in a.json and b.json",
        "x.two: no zh-CN text",
        "x.one: the languages fill different fields (en ['n'], zh-CN [])",
    ]
