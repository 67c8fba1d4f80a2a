"""`storage.url`: which backend the config names, checked at load, and how
every command opens it (`LoadedConfig.storage_url`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config.core import ConfigError
from gateway.config.loading import LoadedConfig, load_config, parse_config
from gateway.ops.hardening import resolve_sandbox

PASSWORD = "s3cret-Pa55word"


def loaded_of(storage: dict[str, str], home: Path, **env: str) -> LoadedConfig:
    config, missing = parse_config({"storage": storage}, env)
    return LoadedConfig(config, None, home, missing)


def config_error(storage: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config({"storage": storage}, {})
    return str(caught.value)


def test_without_a_url_storage_is_the_default_sqlite_file(tmp_path: Path) -> None:
    loaded = loaded_of({}, tmp_path)

    assert loaded.storage_url == f"sqlite:///{tmp_path}/storage/sessions.db"
    assert loaded.sqlite_path == loaded.storage_path == tmp_path / "storage" / "sessions.db"
    assert not loaded.storage_is_postgres


def test_storage_path_is_still_the_sqlite_file(tmp_path: Path) -> None:
    loaded = loaded_of({"path": str(tmp_path / "my.db")}, tmp_path)

    assert loaded.storage_url == f"sqlite:///{tmp_path}/my.db"
    assert loaded.storage_path == tmp_path / "my.db"


@pytest.mark.parametrize(
    ("url", "path"),
    [("sqlite:///relative/p.db", "relative/p.db"), ("sqlite:////abs/p.db", "/abs/p.db")],
)
def test_a_sqlite_url_names_the_file(tmp_path: Path, url: str, path: str) -> None:
    loaded = loaded_of({"url": url}, tmp_path)

    assert loaded.sqlite_path == loaded.storage_path == Path(path)
    assert loaded.storage_url == f"sqlite:///{path}"


def test_a_postgresql_url_has_no_sqlite_file(tmp_path: Path) -> None:
    url = "postgresql://picobot@db.internal:5433/picobot?sslmode=require"
    loaded = loaded_of({"url": url}, tmp_path)

    assert loaded.storage_url == url
    assert loaded.storage_is_postgres
    assert loaded.sqlite_path is None
    with pytest.raises(ConfigError, match="no SQLite file"):
        _ = loaded.storage_path


def test_the_password_comes_from_the_environment(tmp_path: Path) -> None:
    url = "postgresql://picobot:${PICOBOT_DB_PASSWORD}@127.0.0.1/picobot"

    loaded = loaded_of({"url": url}, tmp_path, PICOBOT_DB_PASSWORD=PASSWORD)

    assert loaded.storage_url == f"postgresql://picobot:{PASSWORD}@127.0.0.1/picobot"
    assert not loaded.missing_env


def test_an_unset_password_variable_is_reported(tmp_path: Path) -> None:
    url = "postgresql://picobot:${PICOBOT_DB_PASSWORD}@127.0.0.1/picobot"

    loaded = loaded_of({"url": url}, tmp_path)

    assert loaded.missing_env == {"storage.url": "PICOBOT_DB_PASSWORD"}


def test_path_and_url_together_are_refused() -> None:
    message = config_error({"path": "a.db", "url": "sqlite:///b.db"})

    assert "storage.path and storage.url are both set" in message


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"mysql://picobot:{PASSWORD}@127.0.0.1/picobot", "unknown scheme 'mysql'"),
        (f"postgresql://picobot:{PASSWORD}@127.0.0.1:notaport/db", "is not a URL"),
        ("/var/lib/picobot/sessions.db", "set storage.path to a SQLite file"),
        ("sqlite://sessions.db", "three slashes"),
        ("sqlite:///", "names no file"),
        ("", "is empty"),
    ],
)
def test_a_bad_url_names_the_key_and_hides_the_password(url: str, says: str) -> None:
    message = config_error({"url": url})

    assert "storage.url" in message
    assert says in message
    assert PASSWORD not in message
    if PASSWORD in url:
        assert "picobot:***@" in message


def test_hardening_hides_the_sqlite_folder_only_when_sqlite_is_used(tmp_path: Path) -> None:
    sqlite = loaded_of({"path": str(tmp_path / "data" / "s.db")}, tmp_path / "home")
    postgres = loaded_of({"url": "postgresql://picobot@127.0.0.1/picobot"}, tmp_path / "home")

    assert (tmp_path / "data").resolve() in resolve_sandbox(sqlite).hidden
    assert (tmp_path / "data").resolve() not in resolve_sandbox(postgres).hidden
    assert (tmp_path / "home").resolve() in resolve_sandbox(postgres).hidden


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but not listening: a connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_start_up_against_an_unreachable_server_never_shows_the_password(
    tmp_path: Path, closed_port: int
) -> None:
    config = tmp_path / "config.json"
    url = f"postgresql://picobot:${{PICOBOT_DB_PASSWORD}}@127.0.0.1:{closed_port}/picobot"
    config.write_text(json.dumps({"storage": {"url": url}, "gateway": {"port": 0}}))
    env = {"PICOBOT_HOME": str(tmp_path / "home"), "PICOBOT_DB_PASSWORD": PASSWORD}
    assert PASSWORD in load_config(str(config), env, tmp_path).storage_url

    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "gateway", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=tmp_path,
        check=False,
    )

    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"cannot connect to postgresql://picobot:***@127.0.0.1:{closed_port}/picobot" in output
    assert PASSWORD not in output


DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "postgresql"


def test_the_deploy_example_keeps_the_password_in_the_environment(tmp_path: Path) -> None:
    from tests.test_deploy import parse_unit

    example = json.loads((DEPLOY / "storage.json").read_text())
    url = example["storage"]["url"]
    env_lines = (DEPLOY / "postgresql.env.example").read_text().splitlines()
    variables = dict(line.split("=", 1) for line in env_lines if line and line[0] != "#")
    drop_in = parse_unit((DEPLOY / "picobot.service.d" / "postgresql.conf").read_text())

    assert "${PICOBOT_DB_PASSWORD}" in url
    assert set(variables) == {"PICOBOT_DB_PASSWORD"}
    assert drop_in["Service"]["EnvironmentFile"] == ["/etc/picobot/postgresql.env"]
    assert "postgresql.service" in drop_in["Unit"]["After"]
    config, missing = parse_config(example, {"PICOBOT_DB_PASSWORD": PASSWORD})
    loaded = LoadedConfig(config, None, tmp_path, missing)
    assert loaded.storage_is_postgres
    assert f"picobot:{PASSWORD}@127.0.0.1:5432/picobot" in loaded.storage_url
