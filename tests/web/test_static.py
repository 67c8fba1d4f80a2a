"""The web UI's files and the operator API over real HTTP: `/` and deep links
answer the page, STATIC_DIR serves from disk, traversal is refused, and with a
token set no data answers without it."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from pathlib import Path

import aiohttp
import pytest
import websockets

from gateway.bus import OutboundMessage
from gateway.web.static import PACKAGED_ROOT
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, ws_client

TOKEN = "s3cret-token"


async def _get(url: str, **headers: str) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as r:
        return r.status, dict(r.headers), await r.text()


async def _raw(port: int, target: str) -> tuple[int, bytes]:
    """A request line sent as is: no client normalises the path first."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_root_and_deep_links_answer_the_page_with_safe_headers(
    home: Path, llm: FakeOpenAI
) -> None:
    page = (PACKAGED_ROOT / "index.html").read_text(encoding="utf-8")
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        for path in ("/", "/chat/cli-3f2a9c", "/ops/outbox", "/a/b/c"):
            status, headers, body = await _get(gw.base_url + path)
            assert (status, body) == (200, page), path
            assert headers["Content-Type"] == "text/html; charset=utf-8"
            assert "script-src 'self'" in headers["Content-Security-Policy"]
            assert "default-src 'none'" in headers["Content-Security-Policy"]
            assert headers["X-Content-Type-Options"] == "nosniff"
        status, headers, body = await _get(gw.base_url + "/js/app.js")
        assert status == 200
        assert headers["Content-Type"] == "text/javascript; charset=utf-8"
        assert body == (PACKAGED_ROOT / "js" / "app.js").read_text(encoding="utf-8")
        # a missing asset and the gateway's own prefixes are 404s, never the page
        for path in ("/js/nope.js", "/api", "/webhooks/x", "/health/x", "/vendor/x.map"):
            status, _, body = await _get(gw.base_url + path)
            assert status == 404, path
            assert "<html" not in body
        # the probes are still theirs
        status, _, body = await _get(gw.base_url + "/health")
        assert (status, json.loads(body)["status"]) == (200, "ok")


async def test_static_dir_serves_from_disk_and_traversal_is_refused(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    (site / "js").mkdir(parents=True)
    (site / "index.html").write_text("<p>dev build 1</p>")
    (site / "js" / "app.js").write_text("// dev")
    (site / ".env").write_text("HIDDEN=1")
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    (site / "escape.txt").symlink_to(tmp_path / "secret.txt")
    loaded = dataclasses.replace(make_config(home, llm.base_url), static_dir=site)
    async with running_gateway(loaded) as gw:
        assert (await _get(gw.base_url + "/"))[2] == "<p>dev build 1</p>"
        (site / "index.html").write_text("<p>dev build 2</p>")  # read at each request
        assert (await _get(gw.base_url + "/some/deep/link"))[2] == "<p>dev build 2</p>"
        assert (await _get(gw.base_url + "/js/app.js"))[2] == "// dev"
        for target in (
            "/../secret.txt",
            "/js/../../secret.txt",
            "/..%2fsecret.txt",
            "/%2e%2e/secret.txt",
            "/%2e%2e%2fsecret.txt",
            "/js/..%5c..%5csecret.txt",
            "/escape.txt",
            "/.env",
            "/%2eenv",
        ):
            status, body = await _raw(gw.port, target)
            assert status == 404, target
            assert b"TOP-SECRET" not in body
            assert b"HIDDEN" not in body


async def test_the_packaged_page_is_served_without_static_dir(home: Path, llm: FakeOpenAI) -> None:
    from gateway.config.loading import load_config

    (home / "config.json").write_text(json.dumps({"gateway": {"port": 0}}))
    assert load_config(None, {"PICOBOT_HOME": str(home)}).static_dir is None
    loaded = load_config(None, {"PICOBOT_HOME": str(home), "STATIC_DIR": str(home)})
    assert loaded.static_dir == home  # the composition root's environ, read once at load


async def test_operator_api_needs_the_token(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"auth_token": TOKEN},
        scheduler={
            "enabled": True,
            "jobs": [
                {
                    "id": "daily-report",
                    "kind": "outbound_message",
                    "schedule": {"type": "cron", "expression": "0 9 * * *"},
                    "target": {"channel": "websocket", "chat_id": "ops"},
                    "payload": {"text": "good morning"},
                }
            ],
        },
    )
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with running_gateway(loaded) as gw:
        assert gw.store is not None
        row = await gw.store.enqueue(OutboundMessage("websocket", "nobody", "lost reply"))
        await gw.store.mark_failed(row, "PermanentSendError: chat gone")
        for path in ("/api/ops/outbox", "/api/ops/jobs", "/api/ops/channels", "/api/anything"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                status, answer, body = await _get(gw.base_url + path, **headers)
                assert status == 401, (path, headers)
                assert answer["WWW-Authenticate"] == "Bearer"
                assert "lost reply" not in body
                assert "daily-report" not in body
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{gw.base_url}/api/ops/outbox/{row}/retry") as r:
                assert r.status == 401
            async with http.get(f"{gw.base_url}/api/ops/outbox", headers=bearer) as r:
                outbox = await r.json()
            assert outbox["counts"] == {"failed": 1}
            assert [(x["id"], x["state"], x["preview"]) for x in outbox["rows"]] == [
                (row, "failed", "lost reply")
            ]
            async with http.get(f"{gw.base_url}/api/ops/jobs", headers=bearer) as r:
                jobs = (await r.json())["jobs"]
            mine = [(j["id"], j["state"]) for j in jobs if not j["id"].startswith("builtin.")]
            assert mine == [("daily-report", "scheduled")]
            async with http.get(f"{gw.base_url}/api/ops/channels", headers=bearer) as r:
                channels = await r.json()
            assert channels["ready"] is True
            assert {c["name"] for c in channels["checks"]} >= {"storage", "channel websocket"}
            async with http.post(f"{gw.base_url}/api/ops/outbox/{row}/retry", headers=bearer) as r:
                assert (r.status, await r.json()) == (200, {"retried": row})
            async with http.post(f"{gw.base_url}/api/ops/outbox/999/retry", headers=bearer) as r:
                assert r.status == 409  # no such failed or parked row
            async with http.get(f"{gw.base_url}/api/nope", headers=bearer) as r:
                assert r.status == 404
            # a page of another origin may not use the API, token or not
            evil = {**bearer, "Origin": "http://evil.example"}
            async with http.get(f"{gw.base_url}/api/ops/outbox", headers=evil) as r:
                assert r.status == 403
        # the page itself needs no token
        assert (await _get(gw.base_url + "/"))[0] == 200


async def test_a_browser_page_of_another_origin_cannot_open_the_websocket(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        url = f"ws://127.0.0.1:{gw.port}/ws"
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(url, origin=websockets.Origin("http://evil.example")):
                pass
        assert refused.value.response.status_code == 403
        own = websockets.Origin(f"http://127.0.0.1:{gw.port}")
        async with websockets.connect(url, origin=own) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": "c"}))
            assert json.loads(await ws.recv())["type"] == "welcome"
        async with ws_client(gw) as client:  # programs send no Origin
            assert await client.ask("hi") == "echo: hi"


def test_vendored_libraries_are_the_pinned_releases() -> None:
    """Each vendored file is byte for byte the file of the pinned npm release
    (VENDOR.json: version, the tarball's integrity, the file's sha256)."""
    vendor = PACKAGED_ROOT / "vendor"
    manifest = json.loads((vendor / "VENDOR.json").read_text(encoding="utf-8"))
    assert set(manifest) == {"marked", "dompurify"}
    for name, entry in manifest.items():
        data = (vendor / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert entry["banner"].endswith(entry["version"])
        assert entry["banner"].encode() in data[:400], name  # the release's own header
        assert entry["npm_integrity"].startswith("sha512-")
        assert (vendor / entry["licence_file"]).is_file()
    page = (PACKAGED_ROOT / "index.html").read_text(encoding="utf-8")
    for entry in manifest.values():
        assert f'src="/vendor/{entry["file"]}"' in page


def test_every_web_file_is_package_data() -> None:
    """`pip install .` (the Dockerfile) ships the UI: each file under
    gateway/web/static matches a package-data pattern of pyproject.toml."""
    import fnmatch
    import tomllib

    root = PACKAGED_ROOT.parents[1]  # the gateway package
    project = tomllib.loads((root.parent / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"]["gateway"]
    files = [p.relative_to(root).as_posix() for p in PACKAGED_ROOT.rglob("*") if p.is_file()]
    assert "web/static/index.html" in files
    for name in files:
        assert any(
            fnmatch.fnmatch(name, pattern) and name.count("/") == pattern.count("/")
            for pattern in patterns
        ), name


async def test_operator_api_bound_beyond_loopback_without_a_token_refuses_everything(
    home: Path, llm: FakeOpenAI
) -> None:
    """With the WebSocket channel off no token is required to start on a
    non-loopback address; the operator API must not be open there. 127.0.0.2
    is on the loopback interface but not one of the loopback names the
    gateway treats as local-only, so it stands in for a LAN address."""
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"host": "127.0.0.2"},
        channels={"websocket": {"enabled": False}},
    )
    async with running_gateway(loaded) as gw:
        assert gw.store is not None
        row = await gw.store.enqueue(OutboundMessage("websocket", "nobody", "lost reply"))
        await gw.store.mark_failed(row, "PermanentSendError: chat gone")
        base = f"http://127.0.0.2:{gw.port}"
        for path in ("/api/ops/outbox", "/api/ops/jobs", "/api/ops/channels", "/api/anything"):
            status, _answer, body = await _get(base + path)
            assert status == 403, path
            assert "gateway.auth_token" in body
            assert "lost reply" not in body
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{base}/api/ops/outbox/{row}/retry") as r,
        ):
            assert r.status == 403
        status, _answer, _body = await _get(f"{base}/health")
        assert status == 200


async def test_the_page_texts_are_served_per_language_and_nothing_else(
    home: Path, llm: FakeOpenAI
) -> None:
    """/i18n/<lang>.json: the merged texts of one language, no token needed
    (they carry no data); an unknown language or any other path there is a
    404, never the page or a file."""
    async with running_gateway(
        make_config(home, llm.base_url, gateway={"auth_token": TOKEN})
    ) as gw:
        status, headers, body = await _get(gw.base_url + "/i18n/zh-CN.json")
        assert status == 200
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert json.loads(body)["nav.console"] == "控制台"
        status, _, body = await _get(gw.base_url + "/i18n/en.json")
        assert (status, json.loads(body)["nav.console"]) == (200, "Console")
        for path in ("/i18n/fr.json", "/i18n/en", "/i18n/", "/i18n/..%2fen.json"):
            status, _, _ = await _get(gw.base_url + path)
            assert status == 404, path
        status, _ = await _raw(gw.port, "/i18n/../js/app.js")
        assert status == 404
