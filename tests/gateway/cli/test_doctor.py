"""`picobot doctor`: exit codes and messages for broken configs, storage, dirs, credentials, probes."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from gateway.bus import OutboundMessage
from gateway.cli.doctor.main import run_doctor
from gateway.config.core import ConfigError
from gateway.config.loading import load_config
from storage.sql.delivery import outbox
from storage.sqlite.db import Database
from storage.sqlite.migrations import MIGRATIONS
from tests.fakes.telegram_server import TOKEN

API_KEY = "sk-doctor-test-key-0123456789"


def base_config(**sections: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "providers": {"default": {"type": "openai", "api_key": "${OPENAI_API_KEY}"}},
        "models": {"default": {"model_id": "gpt-4o-mini"}},
        "channels": {"websocket": {"enabled": True}},
    }
    config.update(sections)
    return config


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.config = tmp_path / "config.json"
        self.env = {"PICOBOT_HOME": str(self.home), "OPENAI_API_KEY": API_KEY}

    def write(self, config: dict[str, Any]) -> None:
        self.config.write_text(json.dumps(config))
        self.config.chmod(0o600)

    async def run(self, *, probe: bool = False) -> tuple[int, str]:
        out = io.StringIO()
        code = await run_doctor(
            str(self.config), self.env, probe=probe, out=out, cwd=self.tmp, probe_timeout_secs=3
        )
        text = out.getvalue()
        assert API_KEY not in text
        assert TOKEN not in text
        return code, text


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def line_of(text: str, check: str) -> str:
    return next(line for line in text.splitlines() if f"{check}:" in line)


async def test_a_healthy_installation_passes(setup: Setup) -> None:
    setup.write(base_config())
    async with Database(setup.home / "storage" / "sessions.db"):
        pass

    code, text = await setup.run()

    assert code == 0, text
    assert line_of(text, "config").startswith("ok")
    storage = line_of(text, "storage")
    assert storage.startswith("ok")
    assert f"schema version {len(MIGRATIONS)}, integrity ok" in storage
    assert line_of(text, "data dir").startswith("ok")
    assert line_of(text, "workspace").startswith("ok")
    assert line_of(text, "provider default").startswith("ok")
    assert "no problems found" in text


async def test_unknown_key_prints_the_start_up_error(setup: Setup) -> None:
    setup.write(base_config(gatway={"port": 1}))
    with pytest.raises(ConfigError) as startup:
        load_config(str(setup.config), setup.env, setup.tmp)

    code, text = await setup.run()

    assert code == 1
    assert str(startup.value) in text  # the same words start-up would print
    assert "gatway: unknown key" in text
    assert line_of(text, "config").startswith("problem")
    assert "docs/CONFIG.md" in text


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (
            b'{"gateway": {"port": 1}, "x": "\xff\xfe"}',
            "not UTF-8 text (byte 31); save it as UTF-8",
        ),
        (b"[" * 20_000 + b"]" * 20_000, "nested too deeply to read"),
        (b'{"gateway": {"port": 1' + b"0" * 5_000 + b"}}", "cannot read: Exceeds the limit"),
    ],
)
async def test_a_config_file_json_cannot_read_is_a_problem_not_a_traceback(
    setup: Setup, content: bytes, says: str
) -> None:
    # start-up and doctor raised UnicodeDecodeError, RecursionError or ValueError
    setup.config.write_bytes(content)
    setup.config.chmod(0o600)
    with pytest.raises(ConfigError, match=re.escape(f"{setup.config}: {says}")):
        load_config(str(setup.config), setup.env, setup.tmp)

    code, text = await setup.run()

    assert code == 1
    assert says in line_of(text, "config")


async def test_missing_provider_key_names_the_variable(setup: Setup) -> None:
    setup.write(base_config())
    del setup.env["OPENAI_API_KEY"]

    code, text = await setup.run()

    # a warning: the gateway starts, and doctor often runs without the service's env
    assert code == 0
    provider = line_of(text, "provider default")
    assert provider.startswith("warn")
    assert "api_key is empty: ${OPENAI_API_KEY} is not set" in provider
    assert "export OPENAI_API_KEY" in text
    assert "no problems found, 1 warning(s)" in text  # reported once, by the provider check


async def test_the_example_config_passes_without_any_variable_set(setup: Setup) -> None:
    """What `make run` writes: inactive MCP servers and disabled channels name
    variables nobody has set; only the provider's key is worth a warning."""
    example = Path(__file__).parents[3] / "config.example.json"
    setup.config.write_bytes(example.read_bytes())
    setup.config.chmod(0o600)
    setup.env = {"PICOBOT_HOME": str(setup.home)}

    code, text = await setup.run()

    assert code == 0, text
    warnings = [line for line in text.splitlines() if line.startswith("warn")]
    assert len(warnings) == 1, text
    assert "${OPENAI_API_KEY} is not set" in warnings[0]
    assert "DASHSCOPE_API_KEY" not in text


async def test_a_failed_load_names_only_the_variables_in_use(setup: Setup) -> None:
    config = base_config(
        channels={
            "websocket": {"enabled": True},
            "telegram": {"enabled": False, "token": "${TELEGRAM_BOT_TOKEN}"},
            "feishu": {"enabled": True, "app_id": "${FEISHU_APP_ID}", "app_secret": "x"},
        },
        mcpServers={
            "off": {"command": "x", "env": {"K": "${OFF_KEY}"}, "isActive": False},
            "on": {"command": "x", "env": {"K": "${ON_KEY}"}},
        },
        bogus=1,
    )
    setup.write(config)
    setup.env = {"PICOBOT_HOME": str(setup.home)}

    code, text = await setup.run()

    assert code == 1
    assert "  bogus: unknown key\n" in text
    for named in ("OPENAI_API_KEY", "FEISHU_APP_ID", "ON_KEY"):
        assert f"${{{named}}} is not set" in text
    for unnamed in ("TELEGRAM_BOT_TOKEN", "OFF_KEY"):
        assert unnamed not in text


async def test_unset_variable_elsewhere_in_the_config(setup: Setup) -> None:
    provider = {"api_key": "${OPENAI_API_KEY}", "extra_headers": {"X-Org": "${ORG_ID}"}}
    setup.write(base_config(providers={"default": provider}))
    code, text = await setup.run()
    assert code == 1
    assert "providers.default.extra_headers.X-Org refers to ${ORG_ID}, which is not set" in text


async def test_literal_empty_key_says_which_variable_to_use(setup: Setup) -> None:
    setup.write(base_config(providers={"default": {"type": "anthropic", "api_key": ""}}))
    code, text = await setup.run()
    assert code == 1
    assert "api_key is empty" in line_of(text, "provider default")
    assert 'set providers.default.api_key to "${ANTHROPIC_API_KEY}"' in text


async def test_local_provider_without_key_is_fine(setup: Setup) -> None:
    provider = {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"}
    setup.write(base_config(providers={"default": provider}))
    code, text = await setup.run()
    assert code == 0, text
    assert "a local server" in line_of(text, "provider default")


async def test_telegram_enabled_with_an_unset_token(setup: Setup) -> None:
    telegram = {"enabled": True, "token": "${TELEGRAM_BOT_TOKEN}"}
    setup.write(base_config(channels={"telegram": telegram}))

    code, text = await setup.run()

    assert code == 1
    assert "token is required" in text
    assert "${TELEGRAM_BOT_TOKEN} is not set in the environment" in text


async def test_wechat_credentials_file(setup: Setup) -> None:
    setup.write(base_config(channels={"wechat": {"enabled": True}}))
    creds = setup.home / "wechat" / "credentials.json"

    code, text = await setup.run()
    assert code == 1
    assert line_of(text, "channel wechat").startswith("problem")
    assert "not logged in" in text
    assert "picobot channels login wechat" in text

    creds.parent.mkdir()
    creds.write_text(json.dumps({"bot_token": "ilink-secret-token", "expired": True}))
    code, text = await setup.run()
    assert code == 1
    assert "expired" in line_of(text, "channel wechat")

    creds.write_text(json.dumps({"bot_token": "ilink-secret-token", "baseurl": "https://x"}))
    code, text = await setup.run()
    assert code == 0, text
    assert line_of(text, "channel wechat").startswith("ok")
    assert "ilink-secret-token" not in text


async def test_unwritable_data_dir_is_a_problem(setup: Setup) -> None:
    setup.write(base_config())
    if os.geteuid() == 0:
        # Root ignores permission bits: use a directory nothing can create files in.
        setup.env["PICOBOT_HOME"] = "/proc/self/picobot"
    else:
        setup.home.chmod(0o500)
    try:
        code, text = await setup.run()
    finally:
        setup.home.chmod(0o700)

    assert code == 1
    data_dir = line_of(text, "data dir")
    assert data_dir.startswith("problem")
    assert "not writable" in data_dir or "cannot be created" in data_dir
    assert "chown picobot" in text


async def test_data_dir_under_a_regular_file_is_a_problem(setup: Setup) -> None:
    setup.write(base_config())
    blocker = setup.tmp / "blocker"
    blocker.write_text("not a directory")
    setup.env["PICOBOT_HOME"] = str(blocker / "picobot")

    code, text = await setup.run()

    assert code == 1
    assert f"cannot be created: {blocker} is a file" in line_of(text, "data dir")


async def test_world_readable_config_is_a_warning(setup: Setup) -> None:
    setup.write(base_config())
    setup.config.chmod(0o644)
    code, text = await setup.run()
    assert code == 0
    assert "mode 0644" in text
    assert f"chmod 640 {setup.config}" in text
    setup.config.chmod(0o640)
    code, text = await setup.run()
    assert "mode" not in line_of(text, "config")


async def test_database_from_a_newer_picobot_is_a_problem(setup: Setup) -> None:
    setup.write(base_config())
    db = setup.home / "storage" / "sessions.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()

    code, text = await setup.run()

    assert code == 1
    assert "is newer than this picobot knows" in line_of(text, "storage")
    assert db.read_bytes()  # untouched, not migrated
    with closing(sqlite3.connect(db)) as conn:  # 3.13 warns of a connection left open
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1


async def test_corrupt_database_is_a_problem(setup: Setup) -> None:
    setup.write(base_config())
    db = setup.home / "storage" / "sessions.db"
    db.parent.mkdir()
    db.write_bytes(b"definitely not sqlite" * 200)
    code, text = await setup.run()
    assert code == 1
    assert "cannot be read as SQLite" in line_of(text, "storage")


async def test_failed_outbox_rows_are_a_warning(setup: Setup) -> None:
    setup.write(base_config())
    message = OutboundMessage(channel="telegram", chat_id="1", text="hi")
    async with Database(setup.home / "storage" / "sessions.db") as db:
        await db.write(lambda c: outbox.mark_failed(c, outbox.enqueue(c, message), "HTTP 400"))

    code, text = await setup.run()

    assert code == 0, text  # worth knowing, not a problem
    assert line_of(text, "outbox") == (
        "warn    outbox: 1 message(s) could not be delivered (outbox state 'failed')"
    )


async def test_doctor_creates_no_database(setup: Setup) -> None:
    setup.write(base_config())
    code, text = await setup.run()
    assert code == 0, text
    assert "created at first start" in line_of(text, "storage")
    assert not (setup.home / "storage" / "sessions.db").exists()


async def test_pairing_with_no_admin_and_a_closed_channel_are_warned(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    channels = {"websocket": {"enabled": True, "pairing": True}}
    setup.write(base_config(channels=channels))
    code, text = await setup.run()
    assert code == 0, text  # a warning: codes can still be approved on the host
    assert "channels.websocket.pairing is on but no admin is named" in line_of(text, "access")
    setup.write(base_config(channels={"websocket": {"enabled": True, "allow_from": []}}))
    assert "nobody is let in" in line_of((await setup.run())[1], "access")
    setup.env["PICOBOT_ADMINS"] = "websocket:me"
    assert "access:" not in (await setup.run())[1]


async def test_names_the_http_server_would_refuse_are_warned(tmp_path: Path) -> None:
    """A wildcard bind, or webhooks, with no public host name: those requests
    get 421 (gateway/http.py); listing the name silences the warning."""
    setup = Setup(tmp_path)
    gateway = {"host": "0.0.0.0", "auth_token": "t0ken-t0ken-t0ken"}
    feishu = {"enabled": True, "app_id": "cli_x", "app_secret": "s", "mode": "webhook"}
    setup.write(base_config(gateway=gateway, channels={"websocket": {"enabled": True}}))
    code, text = await setup.run()
    assert code == 0, text  # a warning: loopback clients are still answered
    assert 'gateway.host is "0.0.0.0" and no public host name is served' in line_of(text, "http")
    setup.write(base_config(channels={"feishu": feishu}))
    assert "channels.feishu takes webhooks" in line_of((await setup.run())[1], "http")
    setup.write(base_config(gateway={**gateway, "public_hosts": ["chat.example.com"]}))
    assert "http:" not in (await setup.run())[1]
