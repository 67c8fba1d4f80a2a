from __future__ import annotations

import json
from pathlib import Path

import pytest

from skills.state import StateFileError, read_disabled, update_disabled


def test_update_keeps_other_keys_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / ".picobot" / "skill-state.json"
    assert read_disabled(path) == frozenset()
    update_disabled(path, add=["a", "b"])
    path.write_text(json.dumps({**json.loads(path.read_text()), "note": "mine"}))
    assert update_disabled(path, add=["b", "c"]) == ["a", "b", "c"]
    assert update_disabled(path, remove=["a"]) == ["b", "c"]
    data = json.loads(path.read_text())
    assert data == {"disabled_skills": ["b", "c"], "note": "mine"}


def test_a_broken_state_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "skill-state.json"
    path.write_text("{not json")
    with pytest.raises(StateFileError, match=r"skill-state\.json"):
        update_disabled(path, add=["a"])
    assert path.read_text() == "{not json"
