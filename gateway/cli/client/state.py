"""The terminal client's memory between runs ($PICOBOT_HOME/client.json): its
default chat id, and the ids of the replies it has shown, so that a reply the
gateway sends again after a reconnect is shown once.

The chat a run talks in (`chat_id`) is the stored default unless `--chat`
names another; that one is stored as the default only when asked
(`--chat X --remember`), so a one-off `--chat` leaves the usual conversation
where it was."""

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
    chat_id: str = ""  # the chat this run talks in
    default_chat_id: str = ""  # the stored one: what a run without --chat uses
    seen: deque[int] = field(default_factory=lambda: deque(maxlen=_SEEN_KEEP))

    @classmethod
    def load(cls, path: Path) -> ClientState:
        state = cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state.default_chat_id = str(data.get("chat_id", ""))
            state.seen.extend(int(i) for i in data.get("seen", []))
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        if not state.default_chat_id:
            state.default_chat_id = f"cli-{secrets.token_hex(16)}"  # 128 bits: unguessable
            state.save()
        state.chat_id = state.default_chat_id
        return state

    def use_chat(self, chat_id: str, *, remember: bool = False) -> None:
        """Talk in `chat_id` this run; `remember`: from now on by default."""
        self.chat_id = chat_id
        if remember and chat_id != self.default_chat_id:
            self.default_chat_id = chat_id
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"chat_id": self.default_chat_id, "seen": list(self.seen)}
        self.path.write_text(json.dumps(data))

    def first_sight(self, reply_id: Any) -> bool:
        if not isinstance(reply_id, int):
            return True
        if reply_id in self.seen:
            return False
        self.seen.append(reply_id)
        return True
