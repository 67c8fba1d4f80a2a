"""Uploads to the WebSocket channel (`POST /ws/upload`, docs/PROTOCOL.md
"Uploads") on a real gateway: the file a message names reaches the model as
an image part; the surface refuses a missing or wrong token before reading
the body, a foreign origin, a body over the cap (declared or streamed), a type
it does not take or bytes that are not what they claim; and one principal
cannot name another's upload."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.ws_input import MAX_UPLOAD_BYTES, ProtocolError, UploadError, Uploads
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, newest, running_gateway, ws_client

TOKEN = "upload-test-token"
ALICE, BOB = "alice-upload-token", "bob-upload-token"
# a 1×1 PNG
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201e2a3a4a40000000049454e44ae426082"
)


def _files(home: Path) -> list[Path]:
    root = home / "media" / "websocket"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


async def _post(
    base_url: str, body: Any, *, token: str | None, content_type: str = "image/png", **headers: str
) -> tuple[int, dict[str, Any]]:
    sent = {"Content-Type": content_type, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        aiohttp.ClientSession() as http,
        http.post(base_url + "/ws/upload", data=body, headers=sent) as response,
    ):
        return response.status, await response.json(content_type=None)


async def _chunks(total: int) -> AsyncIterator[bytes]:
    """A body that never says its length and goes on past the cap."""
    sent = 0
    while sent < total:
        yield b"\x89PNG\r\n\x1a\n" + b"\0" * 65_528
        sent += 65_536


async def test_an_uploaded_image_reaches_the_model_as_an_image_part(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, gateway={"auth_token": TOKEN})
    async with running_gateway(loaded) as gw:
        status, body = await _post(gw.base_url, PNG, token=TOKEN)
        assert status == 201, body
        assert body["mime_type"] == "image/png"
        assert body["size"] == len(PNG)
        async with ws_client(gw, "web-upload", token=TOKEN) as client:
            frame = {
                "type": "message",
                "id": "m1",
                "text": "what is it?",
                "attachments": [body["ref"]],
            }
            await client.ws.send(json.dumps(frame))
            assert (await client.recv_type("ack"))["status"] == "accepted"
            await client.recv_type("message")
    content = newest(llm.requests[0])["content"]
    assert isinstance(content, list), content
    images = [p for p in content if p["type"] == "image_url"]
    assert len(images) == 1
    assert images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert {"type": "text", "text": "what is it?"} in content


async def test_an_upload_without_the_token_is_refused_and_nothing_kept(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, gateway={"auth_token": TOKEN})
    async with running_gateway(loaded) as gw:
        assert (await _post(gw.base_url, PNG, token=None))[0] == 401
        assert (await _post(gw.base_url, PNG, token="wrong"))[0] == 401
        status, body = await _post(gw.base_url, PNG, token=None, Authorization=f"Basic {TOKEN}")
        assert (status, body["error"]) == (401, "unauthorized")
        # a page of another site, even with the token
        origin = {"Origin": "http://evil.example"}
        assert (await _post(gw.base_url, PNG, token=TOKEN, **origin))[0] == 403
    assert _files(home) == []


async def test_an_upload_over_the_cap_is_refused_declared_or_streamed(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, gateway={"auth_token": TOKEN})
    async with running_gateway(loaded) as gw:
        big = b"\x89PNG\r\n\x1a\n" + b"\0" * MAX_UPLOAD_BYTES
        status, body = await _post(gw.base_url, io.BytesIO(big), token=TOKEN)  # Content-Length
        assert (status, body["error"]) == (413, "too_large")
        status, body = await _post(gw.base_url, _chunks(3 * MAX_UPLOAD_BYTES), token=TOKEN)
        assert (status, body["error"]) == (413, "too_large")
        # the gateway still answers
        assert (await _post(gw.base_url, PNG, token=TOKEN))[0] == 201
    assert len(_files(home)) == 1
    # the cap is channels.websocket.max_upload_bytes
    small = {"websocket": {"max_upload_bytes": 4096}}
    loaded = make_config(home, llm.base_url, gateway={"auth_token": TOKEN}, channels=small)
    async with running_gateway(loaded) as gw:
        over = b"\x89PNG\r\n\x1a\n" + b"\0" * 4096
        assert (await _post(gw.base_url, io.BytesIO(over), token=TOKEN))[0] == 413
        assert (await _post(gw.base_url, PNG, token=TOKEN))[0] == 201


async def test_an_upload_of_another_type_or_bytes_that_lie_is_refused(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        status, body = await _post(
            gw.base_url, b"MZ\x90\0", token=None, content_type="application/x-msdownload"
        )
        assert (status, body["error"]) == (415, "unsupported_type")
        status, body = await _post(gw.base_url, b"<script>", token=None, content_type="image/png")
        assert (status, body["error"]) == (415, "type_mismatch")
        status, body = await _post(gw.base_url, b"", token=None)
        assert (status, body["error"]) == (400, "empty")
        status, body = await _post(gw.base_url, b"notes\n", token=None, content_type="text/plain")
        assert status == 201
        assert body["ref"].endswith(".txt")
    assert len(_files(home)) == 1


async def test_a_message_may_name_only_its_own_principals_uploads(
    home: Path, llm: FakeOpenAI
) -> None:
    tokens = {"alice": ALICE, "bob": BOB}
    loaded = make_config(home, llm.base_url, channels={"websocket": {"tokens": tokens}})
    async with running_gateway(loaded) as gw:
        status, body = await _post(gw.base_url, PNG, token=ALICE)
        assert status == 201
        async with ws_client(gw, "web-bob", token=BOB) as bob:
            for refs in ([body["ref"]], ["../" + body["ref"]], "not-a-list", [1], ["a"] * 5):
                frame = {"type": "message", "id": "m1", "text": "look", "attachments": refs}
                await bob.ws.send(json.dumps(frame))
                error = await bob.recv_type("error")
                assert (error["code"], error["id"]) == ("bad_frame", "m1")
            # text may be empty only with a file
            await bob.ws.send(json.dumps({"type": "message", "id": "m2", "text": " "}))
            assert (await bob.recv_type("error"))["code"] == "bad_frame"
    assert llm.requests == []


async def test_a_link_in_the_upload_folder_is_not_an_upload(tmp_path: Path) -> None:
    uploads = Uploads(tmp_path / "up")

    async def body() -> AsyncIterator[bytes]:
        yield PNG

    saved = await uploads.save("operator", "image/png; charset=x", body(), None)
    (found,) = await uploads.resolve("operator", [saved.ref])
    assert Path(found.path).read_bytes() == PNG
    assert found.mime_type == "image/png"
    link = Path(found.path).with_name("0" * 32 + ".png")
    link.symlink_to(tmp_path / "elsewhere.png")
    (tmp_path / "elsewhere.png").write_bytes(PNG)
    with pytest.raises(ProtocolError):
        await uploads.resolve("operator", [link.name])
    with pytest.raises(ProtocolError):
        await uploads.resolve("token:alice", [saved.ref])  # another principal's folder
    with pytest.raises(UploadError):
        await uploads.save("operator", "image/svg+xml", body(), None)
