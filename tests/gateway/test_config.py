"""Configuration loading: search order, placeholders, errors naming the JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config.core import ConfigError
from gateway.config.loading import load_config


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_unknown_key_names_its_path(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"gateway": {"port": 1, "prot": 2}})
    with pytest.raises(ConfigError) as err:
        load_config(cfg, environ={}, cwd=tmp_path)
    assert "gateway.prot: unknown key" in str(err.value)


def test_wrong_type_names_its_path(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "c.json", {"models": {"default": {"model_id": "m", "temperature": "hot"}}}
    )
    with pytest.raises(ConfigError) as err:
        load_config(cfg, environ={}, cwd=tmp_path)
    assert "models.default.temperature" in str(err.value)
    assert "valid number" in str(err.value)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Asia", "x" * 300])
def test_an_unknown_time_zone_names_its_path(tmp_path: Path, zone: str) -> None:
    # "Asia" is a directory of the zone database and a long name no file:
    # ZoneInfo raises OSError there, which stopped start-up with a traceback
    cfg = _write(tmp_path / "c.json", {"time": {"timezone": zone}})
    with pytest.raises(ConfigError, match=r"time\.timezone: .*unknown IANA time zone"):
        load_config(cfg, environ={}, cwd=tmp_path)


def test_bad_reference_and_bad_json(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"agents": {"default": {"provider": "nope"}}})
    with pytest.raises(ConfigError, match=r"agents\.default\.provider: no provider named 'nope'"):
        load_config(cfg, environ={}, cwd=tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"gateway": ')
    with pytest.raises(ConfigError, match="not valid JSON at line 1"):
        load_config(bad, environ={}, cwd=tmp_path)


def test_a_scheduled_job_must_name_a_configured_agent(tmp_path: Path) -> None:
    job = {
        "id": "daily",
        "kind": "agent_task",
        "schedule": {"type": "interval", "seconds": 60},
        "target": {"channel": "websocket", "chat_id": "c"},
        "payload": {"prompt": "hi", "agent": "ghost"},
    }
    cfg = _write(tmp_path / "c.json", {"scheduler": {"jobs": [job]}})
    with pytest.raises(
        ConfigError, match=r"scheduler\.jobs\[0\] \(daily\): payload\.agent: no agent named 'ghost'"
    ):
        load_config(cfg, environ={}, cwd=tmp_path)
    job["payload"] = {"prompt": "hi", "agent": "default"}
    assert load_config(_write(tmp_path / "ok.json", {"scheduler": {"jobs": [job]}}), {}, tmp_path)


def test_placeholders_are_substituted(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "c.json",
        {
            "providers": {
                "default": {"api_key": "<MY_KEY>", "base_url": "${BASE:-http://fallback/v1}"},
                "other": {"api_key": "${MISSING_KEY}", "extra_headers": {"X-Team": "team-${TEAM}"}},
            },
            "agents": {"default": {"system_prompt": "keep <b>tags</b> and <lower> alone"}},
        },
    )
    loaded = load_config(cfg, environ={"MY_KEY": "k-123", "TEAM": "blue"}, cwd=tmp_path)
    providers = loaded.config.providers
    assert providers["default"].api_key.get_secret_value() == "k-123"
    assert providers["default"].base_url == "http://fallback/v1"
    assert providers["other"].extra_headers == {"X-Team": "team-blue"}
    assert providers["other"].api_key.get_secret_value() == ""
    assert loaded.missing_env == {"providers.other.api_key": "MISSING_KEY"}
    assert loaded.config.agents["default"].system_prompt == "keep <b>tags</b> and <lower> alone"


def test_search_order_and_picobot_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {"PICOBOT_HOME": str(home)}
    # nothing anywhere: built-in defaults
    loaded = load_config(None, environ=env, cwd=cwd)
    assert loaded.path is None
    assert loaded.storage_path == home / "storage" / "sessions.db"
    # ./config.json is found
    _write(cwd / "config.json", {"gateway": {"port": 1111}})
    assert load_config(None, environ=env, cwd=cwd).config.gateway.port == 1111
    # $PICOBOT_HOME/config.json wins over ./config.json
    _write(home / "config.json", {"gateway": {"port": 2222}})
    assert load_config(None, environ=env, cwd=cwd).config.gateway.port == 2222
    # --config wins over both; a missing explicit file is an error
    explicit = _write(tmp_path / "x.json", {"gateway": {"port": 3333}})
    assert load_config(explicit, environ=env, cwd=cwd).config.gateway.port == 3333
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.json", environ=env, cwd=cwd)


def test_public_bind_requires_a_token(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"gateway": {"host": "0.0.0.0"}})
    with pytest.raises(ConfigError, match=r"gateway\.auth_token: required"):
        load_config(cfg, environ={}, cwd=tmp_path)


def test_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "config.example.json"
    loaded = load_config(example, environ={"OPENAI_API_KEY": "k"}, cwd=example.parent)
    assert loaded.config.channels.websocket.enabled
    assert loaded.config.gateway.port == 19876


def test_admins_come_from_the_file_and_from_picobot_admins(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"gateway": {"admins": ["telegram:1"]}})
    env = {"PICOBOT_ADMINS": "feishu:ou_boss, websocket:me  telegram:1"}
    loaded = load_config(cfg, environ=env, cwd=tmp_path)
    assert loaded.config.gateway.admins == ["telegram:1"]
    assert loaded.admins == {"telegram:1", "feishu:ou_boss", "websocket:me"}
    assert load_config(cfg, environ={}, cwd=tmp_path).admins == {"telegram:1"}


@pytest.mark.parametrize("entry", ["123456789", "telegram:", ":42", "telegram: 42"])
def test_an_admin_must_name_channel_and_sender(tmp_path: Path, entry: str) -> None:
    cfg = _write(tmp_path / "c.json", {"gateway": {"admins": [entry]}})
    with pytest.raises(ConfigError, match=r"gateway\.admins\.0: .*channel:sender_id"):
        load_config(cfg, environ={}, cwd=tmp_path)
    if " " not in entry:  # the variable splits on spaces
        with pytest.raises(ConfigError, match=r"PICOBOT_ADMINS: .*channel:sender_id"):
            load_config(None, environ={"PICOBOT_ADMINS": entry}, cwd=tmp_path)


def test_refusal_pair_needs_pairing(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"channels": {"websocket": {"refusal": "pair"}}})
    with pytest.raises(ConfigError, match=r"channels\.websocket: .*needs pairing: true"):
        load_config(cfg, environ={}, cwd=tmp_path)
    cfg = _write(tmp_path / "c.json", {"channels": {"websocket": {"pairing": True}}})
    ws = load_config(cfg, environ={}, cwd=tmp_path).config.channels.websocket
    assert ws.refusal_mode.value == "pair"  # the default once pairing is on
    assert load_config(None, environ={}, cwd=tmp_path).config.channels.websocket.refusal_mode == (
        "explain"
    )


def test_the_retired_attempt_count_is_refused_with_its_path_and_why(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"gateway": {"outbound_max_attempts": 8}})
    with pytest.raises(ConfigError) as err:
        load_config(cfg, environ={}, cwd=tmp_path)
    message = str(err.value)
    assert "gateway.outbound_max_attempts: retired:" in message
    assert "gateway.outbound_give_up_after_secs" in message


def test_outbound_delivery_defaults(tmp_path: Path) -> None:
    gateway = load_config(
        None, environ={"PICOBOT_HOME": str(tmp_path)}, cwd=tmp_path
    ).config.gateway
    assert gateway.outbound_give_up_after_secs == 86_400
    assert gateway.outbound_stale_notice_secs == 600
    assert gateway.outbound_retry_max_secs == 300
