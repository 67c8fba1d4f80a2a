"""The channels.feishu configuration section."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from channels.feishu.config import FeishuConfig, FeishuMode


def test_defaults() -> None:
    config = FeishuConfig()
    assert config.mode is FeishuMode.WS
    assert config.base_url == "https://open.feishu.cn"
    assert (config.reaction_emoji, config.reply_context_max_chars) == ("Typing", 2000)
    assert config.max_message_chars == 20000
    assert config.encrypt_key is None


def test_reference_example_is_accepted() -> None:
    config = FeishuConfig(
        type="feishu",
        app_id="cli_a",
        app_secret="hunter2-secret",
        enabled=True,
        allow_from=["*"],
        agent="default",
        media_dir="~/.picobot/media/feishu",
        reaction_emoji="Typing",
        max_message_chars=20000,
        reply_context_max_chars=20000,
    )
    assert config.app_secret.get_secret_value() == "hunter2-secret"
    assert "hunter2" not in repr(config) + repr(config.app_secret)


@pytest.mark.parametrize(
    ("domain", "base"),
    [
        ("lark", "https://open.larksuite.com"),
        ("Feishu", "https://open.feishu.cn"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ],
)
def test_domains(domain: str, base: str) -> None:
    assert FeishuConfig(domain=domain).base_url == base


@pytest.mark.parametrize(
    "bad",
    [
        {"enabled": True},
        {"enabled": True, "app_id": "cli_a"},
        {"domain": "open.feishu.cn"},
        {"mode": "polling"},
        {"unknown_key": 1},
    ],
)
def test_invalid_sections_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FeishuConfig(**bad)  # type: ignore[arg-type]


def test_blank_secrets_mean_unset() -> None:
    config = FeishuConfig(encrypt_key="", verification_token="")
    assert (config.encrypt_key, config.verification_token) == (None, None)
