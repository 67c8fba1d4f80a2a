"""HTTP client for the WeCom customer-service API (aiohttp): the wire, nothing more.

`gettoken` (the access token, cached until shortly before `expires_in` and kept
in channel state so a restart reuses it), `kf/sync_msg`, `kf/send_msg` and
`media/get`. A call answered with an expired or invalid access token (42001,
40014, 41001) gets one fresh token and is retried once. Non-zero errcodes
become `KfApiError`; what they mean for a send is the channel's business
(channels.wecom_kf.outbound). Never logs; no token or secret in an exception.

    KfError
    ├── KfHttpError(status)          non-200 HTTP answer
    ├── KfTransportError             connection failure, timeout, bad JSON
    └── KfApiError(errcode, errmsg)  HTTP 200 with a non-zero errcode
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from channels.base import StateStore
from channels.capped import API_BODY_MAX, CHUNK, BodyTooLarge, read_capped

__all__ = [
    "TOKEN_ERRCODES",
    "KfApi",
    "KfApiError",
    "KfError",
    "KfHttpError",
    "KfMediaTooLarge",
    "KfTransportError",
    "Media",
    "SyncPage",
]

# Access token expired (42001), invalid (40014), missing (41001): fetch a new one.
TOKEN_ERRCODES = frozenset({42001, 40014, 41001})
_TOKEN_STATE_KEY = "access_token"
_TOKEN_MARGIN_SECS = 300.0  # refresh this long before WeCom says it expires
_FILENAME = re.compile(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)\"?", re.IGNORECASE)


class KfError(Exception):
    pass


class KfHttpError(KfError):
    def __init__(self, status: int, endpoint: str) -> None:
        super().__init__(f"WeCom {endpoint}: HTTP {status}")
        self.status = status


class KfTransportError(KfError):
    pass


class KfMediaTooLarge(KfTransportError):
    """A media file over `max_media_bytes` (by its length, or as it streamed in)."""


class KfApiError(KfError):
    def __init__(self, endpoint: str, errcode: int, errmsg: str) -> None:
        super().__init__(f"WeCom {endpoint}: errcode {errcode} ({errmsg})")
        self.errcode = errcode
        self.errmsg = errmsg


@dataclass(frozen=True, slots=True)
class SyncPage:
    msgs: list[dict[str, Any]]
    next_cursor: str
    has_more: bool


@dataclass(frozen=True, slots=True)
class Media:
    path: Path
    mime_type: str | None
    name: str | None


class KfApi:
    def __init__(
        self,
        base_url: str,
        corp_id: str,
        secret: str,
        *,
        state: StateStore,
        timeout_secs: float,
        on_token: Callable[[str], None],
    ) -> None:
        self._base = base_url.rstrip("/")
        self._corp_id = corp_id
        self._secret = secret
        self._state = state
        self._timeout = aiohttp.ClientTimeout(total=timeout_secs)
        self._on_token = on_token  # keeps each new token out of the logs
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = None
        self._token_until = 0.0  # wall clock (epoch): it is stored across restarts
        self._token_lock = asyncio.Lock()

    async def open(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- access token ----------------------------------------------------------

    async def access_token(self, *, stale: str | None = None) -> str:
        """The cached token; a new one if it is near expiry or equals `stale`."""
        async with self._token_lock:
            if self._token is None:
                await self._load_stored_token()
            usable = self._token is not None and time.time() < self._token_until
            if usable and self._token != stale:
                assert self._token is not None
                return self._token
            body = await self._get_json(
                "gettoken",
                "/cgi-bin/gettoken",
                {"corpid": self._corp_id, "corpsecret": self._secret},
            )
            token = body.get("access_token")
            if not isinstance(token, str) or not token:
                raise KfTransportError("WeCom gettoken: no access_token in the answer")
            self._on_token(token)
            expires_in = float(body.get("expires_in") or 7200)
            self._token = token
            self._token_until = time.time() + max(60.0, expires_in - _TOKEN_MARGIN_SECS)
            stored = json.dumps({"token": token, "until": self._token_until})
            await self._state.set(_TOKEN_STATE_KEY, stored)
            return token

    async def _load_stored_token(self) -> None:
        raw = await self._state.get(_TOKEN_STATE_KEY)
        if not raw:
            return
        try:
            stored = json.loads(raw)
            token, until = str(stored["token"]), float(stored["until"])
        except (ValueError, KeyError, TypeError):
            return
        self._on_token(token)
        self._token, self._token_until = token, until

    # -- calls -----------------------------------------------------------------

    async def sync_msg(
        self, *, cursor: str, token: str | None, open_kfid: str, limit: int
    ) -> SyncPage:
        payload: dict[str, Any] = {"cursor": cursor, "limit": limit, "open_kfid": open_kfid}
        if token:
            payload["token"] = token
        body = await self._post("kf/sync_msg", payload)
        msgs = body.get("msg_list") or []
        if not isinstance(msgs, list):
            raise KfTransportError("WeCom kf/sync_msg: msg_list is not a list")
        return SyncPage(
            msgs=[m for m in msgs if isinstance(m, dict)],
            next_cursor=str(body.get("next_cursor") or ""),
            has_more=bool(body.get("has_more")),
        )

    async def send_text(self, *, touser: str, open_kfid: str, content: str, msgid: str) -> str:
        payload: dict[str, Any] = {
            "touser": touser,
            "open_kfid": open_kfid,
            "msgtype": "text",
            "text": {"content": content},
        }
        if msgid:
            payload["msgid"] = msgid
        body = await self._post("kf/send_msg", payload)
        return str(body.get("msgid") or msgid)

    async def download_media(
        self, media_id: str, directory: Path, stem: str, max_bytes: int
    ) -> Media:
        """`media/get` into `directory`; the name from Content-Disposition when given."""
        for attempt in (1, 2):
            token = await self.access_token()
            url = f"{self._base}/cgi-bin/media/get"
            params = {"access_token": token, "media_id": media_id}
            try:
                async with self._http().get(url, params=params) as resp:
                    if resp.status != 200:
                        raise KfHttpError(resp.status, "media/get")
                    disposition = resp.headers.get("Content-Disposition", "")
                    if not disposition and resp.content_type in ("application/json", "text/plain"):
                        # An error comes as JSON instead of the file (and without a name).
                        self._check("media/get", json.loads(await _read_json_body(resp)))
                        raise KfTransportError("WeCom media/get: no file in the answer")
                    try:
                        data = await read_capped(
                            resp.content.iter_chunked(CHUNK),
                            max_bytes,
                            declared=resp.content_length,
                        )
                    except BodyTooLarge:
                        raise KfMediaTooLarge(
                            "WeCom media/get: file over max_media_bytes"
                        ) from None
                    name = _filename(disposition)
                    mime = resp.content_type or None
            except KfApiError as exc:
                if exc.errcode in TOKEN_ERRCODES and attempt == 1:
                    await self.access_token(stale=token)
                    continue
                raise
            except (aiohttp.ClientError, TimeoutError, ValueError, BodyTooLarge) as exc:
                raise KfTransportError(f"WeCom media/get: {type(exc).__name__}") from None
            safe = Path(name).name if name else ""
            path = directory / (f"{stem}_{safe}" if safe else stem)
            try:
                await asyncio.to_thread(_write_file, path, data)
            except OSError as exc:
                raise KfTransportError(
                    f"WeCom media/get: cannot save the file ({exc.strerror})"
                ) from None
            return Media(path, mime, safe or None)
        raise AssertionError("unreachable")

    async def _post(self, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
        for attempt in (1, 2):
            token = await self.access_token()
            url = f"{self._base}/cgi-bin/{endpoint}"
            body = await self._request("POST", endpoint, url, {"access_token": token}, payload)
            try:
                self._check(endpoint, body)
            except KfApiError as exc:
                if exc.errcode in TOKEN_ERRCODES and attempt == 1:
                    await self.access_token(stale=token)
                    continue
                raise
            return body
        raise AssertionError("unreachable")

    async def _get_json(self, endpoint: str, path: str, params: dict[str, str]) -> dict[str, Any]:
        body = await self._request("GET", endpoint, f"{self._base}{path}", params, None)
        self._check(endpoint, body)
        return body

    async def _request(
        self,
        method: str,
        endpoint: str,
        url: str,
        params: dict[str, str],
        payload: dict[str, Any] | None,
    ) -> dict[str, Any]:
        try:
            async with self._http().request(method, url, params=params, json=payload) as resp:
                if resp.status != 200:
                    raise KfHttpError(resp.status, endpoint)
                body = json.loads(await _read_json_body(resp))
        except (aiohttp.ClientError, TimeoutError, ValueError, BodyTooLarge) as exc:
            # The URL carries the token or the secret: never put it in the message.
            raise KfTransportError(f"WeCom {endpoint}: {type(exc).__name__}") from None
        if not isinstance(body, dict):
            raise KfTransportError(f"WeCom {endpoint}: the answer is not a JSON object")
        return body

    @staticmethod
    def _check(endpoint: str, body: Any) -> None:
        if not isinstance(body, dict):
            raise KfTransportError(f"WeCom {endpoint}: the answer is not a JSON object")
        try:
            errcode = int(body.get("errcode") or 0)
        except (TypeError, ValueError):
            raise KfTransportError(f"WeCom {endpoint}: errcode is not a number") from None
        if errcode != 0:
            raise KfApiError(endpoint, errcode, str(body.get("errmsg") or "")[:200])

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise KfTransportError("the WeCom client is not open")
        return self._session


def _filename(disposition: str) -> str | None:
    match = _FILENAME.search(disposition)
    return match.group(1).strip() if match else None


async def _read_json_body(resp: aiohttp.ClientResponse) -> bytes:
    return await read_capped(
        resp.content.iter_chunked(CHUNK), API_BODY_MAX, declared=resp.content_length
    )


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
