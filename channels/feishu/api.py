"""Feishu Open API client on aiohttp (one per channel instance).

Holds the tenant access token (refreshed before expiry, never shared across
instances or logged), retries Feishu's rate-limit answers and maps failures to
the channel error tree: network/5xx → `TransientSendError`, rate limits after
the retries → `RateLimited`, any other non-zero `code` → `FeishuApiError`
(a `PermanentSendError`). Error messages carry the API path and Feishu's code,
never a credential.
"""

from __future__ import annotations

import asyncio
import io
import json as json_lib  # `json` is the name of a request body below
import mimetypes
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr

from channels.base import PermanentSendError, RateLimited, TransientSendError
from channels.capped import API_BODY_MAX, CHUNK, BodyTooLarge, read_capped, save_bytes

__all__ = ["Download", "FeishuApi", "FeishuApiError", "WsEndpoint"]

RATE_LIMIT_CODES = frozenset({99991400, 99991403})
TOKEN_INVALID_CODES = frozenset({99991661, 99991663, 99991664, 99991668})
_MAX_INLINE_WAIT = 10.0  # longer waits go back to the caller as RateLimited
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class FeishuApiError(PermanentSendError):
    def __init__(self, what: str, code: int, msg: str, status: int) -> None:
        super().__init__(f"feishu {what}: code {code}: {msg} (HTTP {status})")
        self.code = code
        self.status = status


@dataclass(frozen=True, slots=True)
class Download:
    path: Path
    mime_type: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class WsEndpoint:
    url: str
    client_config: dict[str, Any]


class FeishuApi:
    def __init__(
        self,
        base_url: str,
        app_id: str,
        app_secret: SecretStr,
        *,
        timeout_secs: float = 30.0,
        max_retries: int = 3,
        retry_base_secs: float = 0.5,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._app_id = app_id
        self._app_secret = app_secret
        self._timeout = aiohttp.ClientTimeout(total=timeout_secs)
        self._max_retries = max_retries
        self._retry_base = retry_base_secs
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = None
        self._token_refresh_at = 0.0
        self._token_lock = asyncio.Lock()

    @property
    def base_url(self) -> str:
        return self._base

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # Not started yet or already stopped: the dispatcher retries later.
            raise TransientSendError("feishu client is not open")
        return self._session

    async def open(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- token -------------------------------------------------------------

    async def tenant_token(self) -> str:
        async with self._token_lock:
            if self._token is not None and time.monotonic() < self._token_refresh_at:
                return self._token
            body = await self._call(
                "POST",
                "/open-apis/auth/v3/tenant_access_token/internal",
                json={"app_id": self._app_id, "app_secret": self._app_secret.get_secret_value()},
                auth=False,
            )
            token = body.get("tenant_access_token")
            if not isinstance(token, str) or not token:
                raise TransientSendError("feishu token: response without tenant_access_token")
            raw_expire = body.get("expire")
            expire = float(raw_expire) if isinstance(raw_expire, int | float) else 7200.0
            # Refresh well before expiry: 5 minutes early, or halfway for short tokens.
            margin = min(300.0, expire / 2)
            self._token = token
            self._token_refresh_at = time.monotonic() + expire - margin
            return token

    def invalidate_token(self) -> None:
        self._token = None
        self._token_refresh_at = 0.0

    # -- endpoints ---------------------------------------------------------

    async def bot_open_id(self) -> str:
        body = await self._call("GET", "/open-apis/bot/v3/info")
        bot = body.get("bot") or body.get("data", {}).get("bot") or {}
        open_id = bot.get("open_id") if isinstance(bot, dict) else None
        if not isinstance(open_id, str) or not open_id:
            raise TransientSendError("feishu bot info: response without bot.open_id")
        return open_id

    async def send_message(
        self, receive_id: str, msg_type: str, content: str, uuid: str | None, *, id_type: str
    ) -> str:
        payload: dict[str, Any] = {
            "receive_id": receive_id,
            "msg_type": msg_type,
            "content": content,
        }
        if uuid:
            payload["uuid"] = uuid
        body = await self._call(
            "POST", "/open-apis/im/v1/messages", json=payload, params={"receive_id_type": id_type}
        )
        return str(body.get("data", {}).get("message_id", ""))

    async def reply_message(
        self,
        message_id: str,
        msg_type: str,
        content: str,
        uuid: str | None,
        *,
        reply_in_thread: bool = False,
    ) -> str:
        payload: dict[str, Any] = {"msg_type": msg_type, "content": content}
        if reply_in_thread:  # answer in the message's thread (topic), not the chat
            payload["reply_in_thread"] = True
        if uuid:
            payload["uuid"] = uuid
        body = await self._call(
            "POST", f"/open-apis/im/v1/messages/{_seg(message_id)}/reply", json=payload
        )
        return str(body.get("data", {}).get("message_id", ""))

    async def patch_message(self, message_id: str, content: str) -> None:
        """Replace the content of a card this app sent (it must be a shared
        card: `config.update_multi` true before and after)."""
        await self._call(
            "PATCH", f"/open-apis/im/v1/messages/{_seg(message_id)}", json={"content": content}
        )

    async def add_reaction(self, message_id: str, emoji: str) -> str:
        body = await self._call(
            "POST",
            f"/open-apis/im/v1/messages/{_seg(message_id)}/reactions",
            json={"reaction_type": {"emoji_type": emoji}},
        )
        return str(body.get("data", {}).get("reaction_id", ""))

    async def delete_reaction(self, message_id: str, reaction_id: str) -> None:
        await self._call(
            "DELETE",
            f"/open-apis/im/v1/messages/{_seg(message_id)}/reactions/{_seg(reaction_id)}",
        )

    async def upload_image(self, data: bytes, name: str) -> str:
        """POST /im/v1/images (image_type message) → the image_key to send."""
        return await self._upload("images", "image", data, name, {"image_type": "message"})

    async def upload_file(self, data: bytes, name: str) -> str:
        """POST /im/v1/files → the file_key to send (file_type by extension)."""
        fields = {"file_type": _file_type(name), "file_name": name}
        return await self._upload("files", "file", data, name, fields)

    async def _upload(
        self, endpoint: str, part: str, data: bytes, name: str, fields: dict[str, str]
    ) -> str:
        def form() -> aiohttp.FormData:
            body = aiohttp.FormData()
            for field_name, value in fields.items():
                body.add_field(field_name, value)
            # BytesIO, not bytes: aiohttp sends it in chunks (and warns on raw bytes over 1 MB)
            body.add_field(part, io.BytesIO(data), filename=name)
            return body

        answer = await self._call("POST", f"/open-apis/im/v1/{endpoint}", form=form)
        key = answer.get("data", {}).get(f"{part}_key")
        if not isinstance(key, str) or not key:
            raise TransientSendError(f"feishu im/v1/{endpoint}: answer without {part}_key")
        return key

    async def get_message_items(self, message_id: str) -> list[dict[str, Any]]:
        """The message and, for a merged forward, the messages it carries
        (theirs have `upper_message_id` = `message_id`)."""
        body = await self._call("GET", f"/open-apis/im/v1/messages/{_seg(message_id)}")
        items = body.get("data", {}).get("items") or []
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    async def get_message(self, message_id: str) -> dict[str, Any] | None:
        items = await self.get_message_items(message_id)
        return items[0] if items else None

    async def ws_endpoint(self) -> WsEndpoint:
        """Long-connection endpoint discovery (authenticated by app credentials)."""
        body = await self._call(
            "POST",
            "/callback/ws/endpoint",
            json={"AppID": self._app_id, "AppSecret": self._app_secret.get_secret_value()},
            auth=False,
        )
        data = body.get("data") or {}
        url = data.get("URL")
        if not isinstance(url, str) or not url:
            raise TransientSendError("feishu ws endpoint: response without URL")
        config = data.get("ClientConfig")
        return WsEndpoint(url=url, client_config=config if isinstance(config, dict) else {})

    async def download_resource(
        self, message_id: str, file_key: str, kind: str, dest_dir: Path, max_bytes: int
    ) -> Download:
        """GET a message's image/file into `dest_dir`; refuses more than `max_bytes`."""
        path = f"/open-apis/im/v1/messages/{_seg(message_id)}/resources/{_seg(file_key)}"
        headers = {"Authorization": f"Bearer {await self.tenant_token()}"}
        try:
            async with self.session.get(
                self._base + path, params={"type": kind}, headers=headers
            ) as resp:
                ctype = resp.headers.get("Content-Type", "").split(";")[0].strip() or None
                if resp.status >= 500:
                    raise TransientSendError(f"feishu download: HTTP {resp.status}")
                if resp.status != 200 or ctype == "application/json":
                    try:
                        info = json_lib.loads(await _read_api_body(resp))
                    except (ValueError, BodyTooLarge):
                        info = None
                    info = info if isinstance(info, dict) else {}
                    code = info.get("code")
                    code = code if isinstance(code, int) else -1
                    raise FeishuApiError("download", code, str(info.get("msg", "")), resp.status)
                try:
                    data = await read_capped(
                        resp.content.iter_chunked(CHUNK), max_bytes, declared=resp.content_length
                    )
                except BodyTooLarge:
                    raise PermanentSendError(
                        f"feishu download: more than {max_bytes} bytes"
                    ) from None
                name = resp.content_disposition.filename if resp.content_disposition else None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransientSendError(f"feishu download: {type(exc).__name__}") from exc
        ext = Path(name).suffix if name else ""
        if not ext and ctype:
            ext = mimetypes.guess_extension(ctype) or ""
        ext = _SAFE.sub("_", ext)[:12]
        target = dest_dir / f"{_SAFE.sub('_', message_id)}_{_SAFE.sub('_', file_key)}{ext}"
        await asyncio.to_thread(save_bytes, target, data)
        return Download(path=target, mime_type=ctype, name=name)

    # -- transport ---------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        auth: bool = True,
        form: Callable[[], aiohttp.FormData] | None = None,
    ) -> dict[str, Any]:
        what = path.removeprefix("/open-apis/")
        attempt = 0
        refreshed = False
        while True:
            headers = {"Authorization": f"Bearer {await self.tenant_token()}"} if auth else {}
            try:
                async with self.session.request(
                    method,
                    self._base + path,
                    json=json,
                    params=params,
                    headers=headers,
                    data=form() if form is not None else None,  # a fresh body per attempt
                ) as resp:
                    status = resp.status
                    reset = resp.headers.get("x-ogw-ratelimit-reset")
                    try:
                        body = json_lib.loads(await _read_api_body(resp))
                    except (ValueError, BodyTooLarge):
                        body = None
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise TransientSendError(f"feishu {what}: {type(exc).__name__}") from exc
            code = body.get("code") if isinstance(body, dict) else None
            if status == 429 or code in RATE_LIMIT_CODES:
                delay = self._retry_delay(attempt, reset)
                if attempt >= self._max_retries or delay > _MAX_INLINE_WAIT:
                    raise RateLimited(f"feishu {what}: rate limited (code {code})", delay)
                attempt += 1
                await asyncio.sleep(delay)
                continue
            if auth and code in TOKEN_INVALID_CODES and not refreshed:
                self.invalidate_token()
                refreshed = True
                continue
            if status >= 500:
                raise TransientSendError(f"feishu {what}: HTTP {status}")
            if not isinstance(body, dict):
                raise TransientSendError(f"feishu {what}: non-JSON response (HTTP {status})")
            if code != 0:
                raise FeishuApiError(what, int(code or -1), str(body.get("msg", "")), status)
            return body

    def _retry_delay(self, attempt: int, reset_header: str | None) -> float:
        if reset_header:
            try:
                return max(0.0, float(reset_header))
            except ValueError:
                pass
        base: float = self._retry_base * (2**attempt)
        return base + random.uniform(0, base / 2)


_FILE_TYPES = {"pdf": "pdf", "doc": "doc", "docx": "doc", "xls": "xls", "xlsx": "xls"}
_FILE_TYPES |= {"ppt": "ppt", "pptx": "ppt", "mp4": "mp4", "opus": "opus"}


def _file_type(name: str) -> str:
    """Feishu's file_type for an upload: a few known kinds, else "stream"."""
    return _FILE_TYPES.get(name.rpartition(".")[2].lower(), "stream")


def _seg(value: str) -> str:
    """A path segment from a platform id (ids are opaque but must not add segments)."""
    if not value or "/" in value or value in {".", ".."}:
        raise PermanentSendError("feishu: invalid id in request path")
    return value


async def _read_api_body(resp: aiohttp.ClientResponse) -> bytes:
    return await read_capped(
        resp.content.iter_chunked(CHUNK), API_BODY_MAX, declared=resp.content_length
    )
