"""`picobot init`: a valid 0600 starter config, flags or questions, never a silent overwrite."""

from __future__ import annotations

import argparse
import io
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.prompt_file import DEFAULT_AGENT_PROMPTS
from gateway.cli.init import add_init_arguments, run_init
from gateway.config.core import ChannelsConfig
from gateway.config.loading import load_config


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="picobot init")
    add_init_arguments(parser)
    return parser.parse_args(list(argv))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class Answers:
    """Scripted replies to init's questions; records what was asked."""

    def __init__(self, *replies: str) -> None:
        self._replies: Iterator[str] = iter(replies)
        self.questions: list[str] = []

    def __call__(self, question: str) -> str:
        self.questions.append(question)
        return next(self._replies)


def test_flags_write_a_0600_config_that_loads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"PICOBOT_HOME": str(home)}
    out = io.StringIO()
    args = parse(
        "--provider",
        "openai",
        "--api-key-env",
        "DEEPSEEK_KEY",
        "--model",
        "deepseek-chat",
        "--base-url",
        "https://api.deepseek.com/v1",
    )

    assert run_init(args, env, interactive=False, out=out) == 0

    path = home / "config.json"
    assert mode(path) == 0o600
    raw = json.loads(path.read_text())
    assert raw["providers"]["default"]["api_key"] == "${DEEPSEEK_KEY}"  # a placeholder, no key
    loaded = load_config(None, {**env, "DEEPSEEK_KEY": "sk-from-env-123"}, cwd=tmp_path)
    assert loaded.path == path
    provider = loaded.config.providers["default"]
    assert provider.type == "openai"
    assert provider.api_key.get_secret_value() == "sk-from-env-123"
    assert provider.base_url == "https://api.deepseek.com/v1"
    assert loaded.config.models["default"].model_id == "deepseek-chat"
    assert list(loaded.config.channels.enabled()) == ["websocket"]
    assert "DEEPSEEK_KEY" in out.getvalue()


def test_anthropic_defaults(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    assert (
        run_init(parse("--provider", "anthropic"), env, interactive=False, out=io.StringIO()) == 0
    )
    loaded = load_config(None, {**env, "ANTHROPIC_API_KEY": "k-123456"}, cwd=tmp_path)
    assert loaded.config.providers["default"].type == "anthropic"
    assert loaded.config.providers["default"].api_key.get_secret_value() == "k-123456"
    assert loaded.config.providers["default"].base_url is None
    assert loaded.config.models["default"].model_id.startswith("claude")
    assert loaded.missing_env == {}


def test_never_overwrites_without_force(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    path = tmp_path / "config.json"
    path.write_text('{"logging": {"level": "debug"}}')
    path.chmod(0o640)

    out = io.StringIO()
    assert run_init(parse("--provider", "anthropic"), env, interactive=False, out=out) == 1
    assert path.read_text() == '{"logging": {"level": "debug"}}'
    assert "--force" in out.getvalue()

    assert (
        run_init(
            parse("--provider", "anthropic", "--force"), env, interactive=False, out=io.StringIO()
        )
        == 0
    )
    assert json.loads(path.read_text())["providers"]["default"]["type"] == "anthropic"
    assert mode(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent", "config.json"]  # no temp file


def test_interactive_asks_and_re_asks_on_bad_answers(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    answers = Answers(
        "anthropic",
        "sk-ant-this-is-a-key-not-a-name",  # rejected: a key, not a variable name
        "CLAUDE_KEY",
        "",  # default model
        "",  # no base URL
        "websocket, irc",  # rejected: unknown channel
        "websocket,telegram",
        "",  # AGENT.md in the default language
    )
    out = io.StringIO()
    assert run_init(parse(), env, interactive=True, out=out, ask=answers) == 0

    assert len(answers.questions) == 8
    assert "not an environment variable name" in out.getvalue()
    assert "irc" in out.getvalue()
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["providers"]["default"] == {"type": "anthropic", "api_key": "${CLAUDE_KEY}"}
    assert "sk-ant-this-is-a-key-not-a-name" not in json.dumps(raw)
    # An enabled channel's credentials are placeholders too; disabled ones carry none.
    assert raw["channels"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN}"
    assert raw["channels"]["feishu"] == {"enabled": False}
    assert "TELEGRAM_BOT_TOKEN" in out.getvalue()
    loaded = load_config(None, {**env, "TELEGRAM_BOT_TOKEN": "123:abc"}, cwd=tmp_path)
    assert sorted(loaded.config.channels.enabled()) == ["telegram", "websocket"]
    assert loaded.config.channels.telegram.token.get_secret_value() == "123:abc"


def test_interactive_end_of_input_writes_nothing(tmp_path: Path) -> None:
    def closed(_question: str) -> str:
        raise EOFError

    out = io.StringIO()
    env = {"PICOBOT_HOME": str(tmp_path)}
    assert run_init(parse(), env, interactive=True, out=out, ask=closed) == 1
    assert not (tmp_path / "config.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--api-key-env", "my key!"), "not an environment variable name"),
        (("--base-url", "api.example.com"), "not an http(s) URL"),
    ],
)
def test_bad_flags_write_nothing(tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    out = io.StringIO()
    assert run_init(parse(*argv), {"PICOBOT_HOME": str(tmp_path)}, interactive=False, out=out) == 1
    assert message in out.getvalue()
    assert not (tmp_path / "config.json").exists()


def test_flags_on_a_terminal_answer_the_questions(tmp_path: Path) -> None:
    answers = Answers()  # any question would fail: there are no replies
    env = {"PICOBOT_HOME": str(tmp_path)}
    args = parse("--provider", "anthropic", "--channel", "websocket")
    assert run_init(args, env, interactive=True, out=io.StringIO(), ask=answers) == 0
    assert answers.questions == []
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["providers"]["default"]["type"] == "anthropic"


def test_locale_zh_cn_writes_the_chinese_agent_md(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    out = io.StringIO()
    assert run_init(parse("--locale", "zh-CN"), env, interactive=False, out=out) == 0
    prompt = tmp_path / "agent" / "AGENT.md"
    assert prompt.read_text(encoding="utf-8") == DEFAULT_AGENT_PROMPTS["zh-CN"]
    assert "用用户所用的语言回复" in prompt.read_text(encoding="utf-8")
    assert f"wrote {prompt} (zh-CN)" in out.getvalue()
    load_config(None, {**env, "OPENAI_API_KEY": "k"}, cwd=tmp_path)  # the config still loads


def test_the_default_agent_md_is_english_and_an_edited_one_is_kept(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    assert run_init(parse(), env, interactive=False, out=io.StringIO()) == 0
    prompt = tmp_path / "agent" / "AGENT.md"
    assert prompt.read_text(encoding="utf-8") == DEFAULT_AGENT_PROMPTS["en"]
    prompt.write_text("my own persona", encoding="utf-8")
    out = io.StringIO()
    args = parse("--locale", "zh-CN", "--force")
    assert run_init(args, env, interactive=False, out=out) == 0
    assert prompt.read_text(encoding="utf-8") == "my own persona"
    assert "kept" in out.getvalue()


def test_interactive_asks_the_agent_md_language(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    answers = Answers("", "", "", "", "", "fr", "zh-CN")  # "fr" is asked again
    out = io.StringIO()
    assert run_init(parse(), env, interactive=True, out=out, ask=answers) == 0
    assert "unknown locale 'fr'" in out.getvalue()
    prompt = (tmp_path / "agent" / "AGENT.md").read_text(encoding="utf-8")
    assert prompt == DEFAULT_AGENT_PROMPTS["zh-CN"]


def test_the_readme_variables_choose_the_endpoint_and_the_model(tmp_path: Path) -> None:
    """README tells a DeepSeek or Qwen user to set OPENAI_BASE_URL and OPENAI_MODEL."""
    env = {
        "PICOBOT_HOME": str(tmp_path),
        "OPENAI_BASE_URL": "https://api.deepseek.com/v1",
        "OPENAI_MODEL": "deepseek-chat",
    }
    out = io.StringIO()
    assert run_init(parse(), env, interactive=False, out=out) == 0
    loaded = load_config(None, {**env, "OPENAI_API_KEY": "sk-1"}, cwd=tmp_path)
    assert loaded.config.providers["default"].base_url == "https://api.deepseek.com/v1"
    assert loaded.config.models["default"].model_id == "deepseek-chat"
    assert "deepseek-chat (from $OPENAI_MODEL)" in out.getvalue()
    assert "endpoint https://api.deepseek.com/v1 (from $OPENAI_BASE_URL)" in out.getvalue()
    # a flag still wins, and an interactive run offers the variables as its defaults
    answers = Answers("", "", "", "", "", "")
    env["PICOBOT_HOME"] = str(tmp_path / "asked")
    assert run_init(parse(), env, interactive=True, out=io.StringIO(), ask=answers) == 0
    assert "model id [deepseek-chat]: " in answers.questions
    assert (
        "base URL (empty: the provider's own) [https://api.deepseek.com/v1]: " in answers.questions
    )
    env["PICOBOT_HOME"] = str(tmp_path / "flag")
    assert run_init(parse("--model", "qwen-max"), env, interactive=False, out=io.StringIO()) == 0
    flagged = json.loads((tmp_path / "flag" / "config.json").read_text())
    assert flagged["models"]["default"]["model_id"] == "qwen-max"


def test_every_channel_can_be_enabled_including_wecom_kf(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    out = io.StringIO()
    args = parse("--channel", "websocket", "--channel", "wecom_kf")
    assert run_init(args, env, interactive=False, out=out) == 0
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["channels"]["wecom_kf"] == {
        "enabled": True,
        "corp_id": "${WECOM_CORP_ID}",
        "secret": "${WECOM_KF_SECRET}",
        "token": "${WECOM_KF_TOKEN}",
        "encoding_aes_key": "${WECOM_KF_AES_KEY}",
    }
    assert "WECOM_KF_AES_KEY" in out.getvalue()
    assert set(raw["channels"]) == set(ChannelsConfig.model_fields)  # every channel is offered


def test_the_api_channel_gets_a_key_placeholder(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path)}
    out = io.StringIO()
    assert run_init(parse("--channel", "api"), env, interactive=False, out=out) == 0
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["channels"]["api"] == {"enabled": True, "keys": {"app": "${PICOBOT_API_KEY}"}}
    assert "PICOBOT_API_KEY" in out.getvalue()
