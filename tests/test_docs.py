"""Docs stay true: every config key is in docs/CONFIG.md, every section in the example."""

from __future__ import annotations

import json
import typing
from pathlib import Path

from pydantic import BaseModel

from agent.mcp.config import McpServerConfig
from gateway.config import AgentConfig, Config, ModelConfig, ProviderConfig

ROOT = Path(__file__).resolve().parents[1]
NAMED = {
    "providers": (ProviderConfig, "<name>"),
    "models": (ModelConfig, "<name>"),
    "agents": (AgentConfig, "<name>"),
    "mcpServers": (McpServerConfig, "<key>"),
}


def _keys(model: type[BaseModel], prefix: str) -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        spelled = field.alias or name  # as the file spells it (mcpServers, isActive, baseUrl)
        key = prefix + spelled
        if model is Config and spelled in NAMED:
            entry, placeholder = NAMED[spelled]
            keys.extend(_keys(entry, f"{spelled}.{placeholder}."))
            continue
        sub = [
            c
            for c in (field.annotation, *typing.get_args(field.annotation))
            if isinstance(c, type) and issubclass(c, BaseModel)
        ]
        keys.extend(_keys(sub[0], key + ".") if sub and key != "scheduler.jobs" else [key])
    return keys


def test_every_config_key_is_documented() -> None:
    doc = (ROOT / "docs" / "CONFIG.md").read_text()
    keys = _keys(Config, "")
    assert len(keys) > 100
    missing = [k for k in keys if f"`{k}`" not in doc]
    assert missing == []


def test_example_config_has_every_section_and_channel() -> None:
    example = json.loads((ROOT / "config.example.json").read_text())
    assert set(example) == {f.alias or name for name, f in Config.model_fields.items()}
    assert set(example["channels"]) == {"websocket", "telegram", "feishu", "wechat", "wecom_kf"}


def test_readme_keeps_the_quick_start() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme
    assert "make test" in readme
