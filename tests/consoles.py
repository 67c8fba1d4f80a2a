"""Set-ups the console's API tests (tests/e2e/test_console_*.py) and its
browser tests (tests/web/test_console_*.py) share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.config.loading import LoadedConfig
from gateway.ops.logging import clear_secrets, register_secrets
from tests.support import make_config

# A SQLite trigger that refuses to record an inbound message saying "poison":
# the inbox refuses it, so the gateway keeps it as a dead letter (what a
# message the inbox cannot take becomes); dropping it is "the cause fixed".
REFUSE_POISON = (
    "CREATE TRIGGER refuse_poison BEFORE INSERT ON inbox "
    "WHEN instr(NEW.payload, 'poison') > 0 BEGIN SELECT RAISE(ABORT, 'refused'); END"
)


@contextmanager
def planted_secret(secret: str) -> Iterator[str]:
    """`secret` registered with the log redactor for the block, as a real one is."""
    register_secrets([secret])
    try:
        yield secret
    finally:
        clear_secrets()


def usage_config(
    home: Path, llm_url: str, claude_url: str, limits: dict[str, Any], **sections: Any
) -> LoadedConfig:
    """Two agents on two providers with prices (the WebSocket channel's on
    Anthropic with a prompt cache), budgets as `limits`, skills off."""
    return make_config(
        home,
        llm_url,
        providers={"claude": {"type": "anthropic", "base_url": claude_url, "api_key": "k"}},
        models={
            "default": {"model_id": "fake-model", "prices": {"input": 1, "output": 2}},
            "sonnet": {
                "model_id": "claude-test",
                "prices": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
            },
        },
        agents={"default": {}, "claude": {"provider": "claude", "model": "sonnet"}},
        channels={"websocket": {"agent": "claude"}},
        limits=limits,
        skills={"enabled": False},
        **sections,
    )
