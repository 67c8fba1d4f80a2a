"""The terminal client's chat id: unguessable when new (another token cannot
name it by guessing: docs/PROTOCOL.md "Chat ownership"), kept when saved."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gateway.cli.client.main import ClientState


def test_a_new_chat_id_has_128_random_bits(tmp_path: Path) -> None:
    ids = {ClientState.load(tmp_path / f"client-{n}.json").chat_id for n in range(3)}
    assert len(ids) == 3
    assert all(re.fullmatch(r"cli-[0-9a-f]{32}", i) for i in ids), ids


def test_a_chat_id_saved_by_an_older_version_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    path.write_text(json.dumps({"chat_id": "cli-3f2a9c0b1d2e", "seen": [4]}))
    assert ClientState.load(path).chat_id == "cli-3f2a9c0b1d2e"


def test_another_chat_for_one_run_leaves_the_stored_default_alone(tmp_path: Path) -> None:
    """`--chat X` (issue 59): the next run without it is back in the usual chat."""
    path = tmp_path / "client.json"
    usual = ClientState.load(path).chat_id
    state = ClientState.load(path)
    state.use_chat("cli-elsewhere")
    assert state.chat_id == "cli-elsewhere"
    assert state.first_sight(9)
    state.save()  # as after showing a reply in chat X
    assert json.loads(path.read_text())["chat_id"] == usual
    again = ClientState.load(path)
    assert again.chat_id == usual
    assert not again.first_sight(9)  # the replies shown are still remembered


def test_remember_makes_the_chat_the_default(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    ClientState.load(path).use_chat("cli-elsewhere", remember=True)
    assert ClientState.load(path).chat_id == "cli-elsewhere"
