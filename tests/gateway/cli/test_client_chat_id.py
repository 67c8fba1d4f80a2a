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
