"""Texts the gateway writes itself: the late-reply note."""

from __future__ import annotations

from gateway.replies import format_duration, late_note


def test_durations_read_in_two_units_at_most() -> None:
    assert [format_duration(s) for s in (0.4, 45, 720, 3_900, 7_200, 190_000, 172_800)] == [
        "0 s",
        "45 s",
        "12 min",
        "1 h 5 min",
        "2 h",
        "2 d 4 h",
        "2 d",
    ]


def test_the_late_note_is_a_paragraph_of_its_own() -> None:
    assert late_note(3_900) == (
        "\n\n(Sent late: this reply was written 1 h 5 min ago and could not be delivered until now.)"
    )
