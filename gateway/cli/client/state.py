"""The terminal client's memory between runs ($PICOBOT_HOME/client.json): its
stable chat id, and the ids of the replies it has shown, so that a reply the
gateway sends again after a reconnect is shown once."""

from __future__ import annotations

import json
import secrets
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ClientState"]

_SEEN_KEEP = 500


@dataclass(slots=True)
class ClientState:
    """Persisted in $PICOBOT_HOME/client.json."""

    path: Path
    chat_id: str = ""
    seen: deque[int] = field(default_factory=lambda: deque(maxlen=_SEEN_KEEP))

    @classmethod
    def load(cls, path: Path) -> ClientState:
        state = cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state.chat_id = str(data.get("chat_id", ""))
            state.seen.extend(int(i) for i in data.get("seen", []))
        except (OSError, ValueError):
            pass
        if not state.chat_id:
            state.chat_id = f"cli-{secrets.token_hex(16)}"  # 128 bits: unguessable
            state.save()
        return state

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"chat_id": self.chat_id, "seen": list(self.seen)}))

    def first_sight(self, reply_id: Any) -> bool:
        if not isinstance(reply_id, int):
            return True
        if reply_id in self.seen:
            return False
        self.seen.append(reply_id)
        return True
