from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI

# Loopback must never be proxied in tests.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "picobot-home"
    path.mkdir()
    return path


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake
