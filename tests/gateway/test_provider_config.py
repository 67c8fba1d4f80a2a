"""Provider settings checked at start-up: sampling limits per provider type,
prompt-cache keys (docs/caching.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.providers.base import CacheTTL
from gateway.cli.program import main
from gateway.config.core import ConfigError
from gateway.config.loading import load_config
from gateway.turns.agents import provider_settings


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def _anthropic_agent(temperature: float, **provider: object) -> dict[str, object]:
    return {
        "providers": {"claude": {"type": "anthropic", **provider}},
        "models": {"sonnet": {"model_id": "claude-x", "temperature": temperature}},
        "agents": {"default": {"provider": "claude", "model": "sonnet"}},
    }


def test_a_temperature_the_provider_refuses_fails_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(tmp_path / "c.json", _anthropic_agent(1.5))
    assert main(["gateway", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert (
        "providers.claude: models.sonnet.temperature 1.5 is out of range: anthropic "
        "providers take 0 to 1 (agents.default uses both)"
    ) in err
    assert load_config(_write(tmp_path / "ok.json", _anthropic_agent(1.0)), {}, tmp_path)
    openai = {"models": {"default": {"model_id": "m", "temperature": 1.5}}}
    assert load_config(_write(tmp_path / "openai.json", openai), {}, tmp_path)


def test_prompt_cache_settings_by_provider_type(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"providers": {"default": {"prompt_cache_ttl": "1h"}}})
    with pytest.raises(ConfigError, match=r"providers\.default\.prompt_cache_ttl: only anthropic"):
        load_config(cfg, environ={}, cwd=tmp_path)
    raw = {
        "providers": {
            "default": {},
            "deepseek": {"base_url": "https://api.deepseek.com/v1"},
            "vllm": {"base_url": "http://127.0.0.1:8000/v1", "prompt_cache_key": True},
            "quiet": {"prompt_cache": "off"},
            "claude": {"type": "anthropic", "prompt_cache_ttl": "1h"},
        }
    }
    loaded = load_config(_write(tmp_path / "ok.json", raw), environ={}, cwd=tmp_path)
    caches = {name: provider_settings(loaded, name).prompt_cache for name in raw["providers"]}
    assert {name: c.send_key for name, c in caches.items()} == {
        "default": True,  # OpenAI itself takes the key
        "deepseek": False,  # unknown fields may be refused: only when asked
        "vllm": True,
        "quiet": False,
        "claude": False,
    }
    assert caches["quiet"].enabled is False
    assert caches["claude"].ttl is CacheTTL.ONE_HOUR
