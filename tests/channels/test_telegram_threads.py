"""Reply handles that carry a forum topic's thread id."""

from __future__ import annotations

from channels.telegram.threads import make_handle, parse_handle


def test_a_handle_round_trips_with_and_without_a_thread() -> None:
    assert parse_handle(make_handle("-100777", 15, 42)) == (15, 42)
    assert parse_handle(make_handle("-100777", 15, None)) == (15, None)
    assert make_handle("42", 3, None) == "42:3"  # the dedup key form, unchanged


def test_anything_else_has_neither() -> None:
    assert parse_handle(None) == (None, None)
    assert parse_handle("") == (None, None)
    assert parse_handle("oc_chat:om_x") == (None, None)
