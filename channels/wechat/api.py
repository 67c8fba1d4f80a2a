"""HTTP client for Tencent's iLink bot API (aiohttp): the wire, nothing more.

Builds the headers every call needs, adds `base_info` to authenticated bodies,
and turns transport failures and non-zero `ret`/`errcode` into `ILinkError`s.
It never logs and never puts the bot token or a context token in an exception
message. Policy (retries, back-off, what an error means for the channel) lives
in the poller, the sender and the login flow.

    ILinkError
    ├── ILinkHttpError(status)        non-200 HTTP answer
    ├── ILinkTransportError           connection failure, bad JSON
    └── ILinkRetError(ret, errcode)   HTTP 200 with a non-zero ret/errcode
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

from channels.capped import API_BODY_MAX, CHUNK, BodyTooLarge, read_capped

__all__ = [
    "APP_ID",
    "CLIENT_VERSION",
    "SESSION_EXPIRED",
    "ILinkClient",
    "ILinkConfig",
    "ILinkError",
    "ILinkHttpError",
    "ILinkRetError",
    "ILinkTransportError",
    "UpdatesBatch",
    "client_version_code",
]

APP_ID = "bot"
CLIENT_VERSION = "2.4.9"
BOT_AGENT = "picobot"
BOT_TYPE = "3"
SESSION_EXPIRED = -14
ITEM_TEXT = 1


def client_version_code(version: str) -> int:
    """`major<<16 | minor<<8 | patch`, as iLink-App-ClientVersion wants it."""
    major, minor, patch = (int(p) for p in version.split("."))
    return (major << 16) | (minor << 8) | patch


class ILinkError(Exception):
    pass


class ILinkHttpError(ILinkError):
    def __init__(self, status: int, endpoint: str) -> None:
        super().__init__(f"iLink {endpoint}: HTTP {status}")
        self.status = status


class ILinkTransportError(ILinkError):
    pass


class ILinkRetError(ILinkError):
    def __init__(self, endpoint: str, ret: int, errcode: int | None, errmsg: str) -> None:
        super().__init__(f"iLink {endpoint}: ret={ret} errcode={errcode} errmsg={errmsg!r}")
        self.ret = ret
        self.errcode = errcode
        self.errmsg = errmsg

    @property
    def session_expired(self) -> bool:
        return SESSION_EXPIRED in (self.ret, self.errcode)


@dataclass(frozen=True, slots=True)
class ILinkConfig:
    """What `getconfig` answers for one user."""

    typing_ticket: str | None
    context_token: str | None


@dataclass(frozen=True, slots=True)
class UpdatesBatch:
    msgs: list[dict[str, Any]] = field(default_factory=list)
    cursor: str | None = None  # new get_updates_buf, None when absent/empty
    longpolling_timeout_ms: int | None = None


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def check_ret(endpoint: str, body: dict[str, Any]) -> None:
    """A missing `ret` means success (getupdates omits it); anything non-zero fails."""
    ret = _as_int(body.get("ret")) or 0
    errcode = _as_int(body.get("errcode"))
    if ret != 0 or (errcode not in (None, 0)):
        raise ILinkRetError(endpoint, ret or (errcode or 0), errcode, str(body.get("errmsg") or ""))


class ILinkClient:
    """One iLink host (`base_url`), optionally authenticated with a bot token."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        token: str | None = None,
        request_timeout: float = 15.0,
    ) -> None:
        self._session = session
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._request_timeout = request_timeout

    def with_token(self, token: str | None) -> None:
        self._token = token

    def with_base_url(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _headers(self, *, auth: bool) -> dict[str, str]:
        headers = {
            "iLink-App-Id": APP_ID,
            "iLink-App-ClientVersion": str(client_version_code(CLIENT_VERSION)),
        }
        if auth:  # the login calls carry only the iLink-App-* headers
            uin = str(secrets.randbits(32))
            headers["X-WECHAT-UIN"] = base64.b64encode(uin.encode()).decode()
            headers["Content-Type"] = "application/json"
            headers["AuthorizationType"] = "ilink_bot_token"
            if self._token:
                headers["Authorization"] = f"Bearer {self._token}"
        return headers

    async def _request(
        self,
        method: str,
        endpoint: str,
        *,
        body: dict[str, Any] | None = None,
        query: str = "",
        auth: bool = True,
        wait_secs: float | None = None,
    ) -> dict[str, Any]:
        url = f"{self.base_url}/ilink/bot/{endpoint}{query}"
        data = None
        headers = self._headers(auth=auth)
        if body is not None:
            payload = dict(body)
            if auth:
                payload["base_info"] = {"channel_version": CLIENT_VERSION, "bot_agent": BOT_AGENT}
            data = json.dumps(payload, ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        client_timeout = aiohttp.ClientTimeout(total=wait_secs or self._request_timeout)
        try:
            async with self._session.request(
                method, url, data=data, headers=headers, timeout=client_timeout
            ) as resp:
                if resp.status != 200:
                    raise ILinkHttpError(resp.status, endpoint)
                raw = await read_capped(
                    resp.content.iter_chunked(CHUNK), API_BODY_MAX, declared=resp.content_length
                )
        except TimeoutError:
            raise
        except BodyTooLarge as exc:
            raise ILinkTransportError(f"iLink {endpoint}: answer {exc}") from None
        except aiohttp.ClientError as exc:
            raise ILinkTransportError(f"iLink {endpoint}: {type(exc).__name__}") from exc
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise ILinkTransportError(f"iLink {endpoint}: response is not JSON") from exc
        if not isinstance(parsed, dict):
            raise ILinkTransportError(f"iLink {endpoint}: response is not a JSON object")
        return parsed

    # -- login (unauthenticated) -------------------------------------------------

    async def get_bot_qrcode(self, local_tokens: list[str]) -> dict[str, Any]:
        """POST with `local_token_list`; older hosts only know GET (uncertain: try both)."""
        query = f"?bot_type={BOT_TYPE}"
        try:
            body = await self._request(
                "POST",
                "get_bot_qrcode",
                body={"local_token_list": local_tokens},
                query=query,
                auth=False,
            )
        except ILinkHttpError as exc:
            if exc.status not in (404, 405):
                raise
            body = await self._request("GET", "get_bot_qrcode", query=query, auth=False)
        check_ret("get_bot_qrcode", body)
        return body

    async def get_qrcode_status(
        self, qrcode: str, *, verify_code: str | None, wait_secs: float
    ) -> dict[str, Any]:
        query = f"?qrcode={quote(qrcode, safe='')}"
        if verify_code:
            query += f"&verify_code={quote(verify_code, safe='')}"
        body = await self._request(
            "GET", "get_qrcode_status", query=query, auth=False, wait_secs=wait_secs
        )
        check_ret("get_qrcode_status", body)
        return body

    # -- authenticated -----------------------------------------------------------

    async def get_updates(self, cursor: str, wait_secs: float) -> UpdatesBatch:
        """Raises TimeoutError when the long poll outlives `wait_secs` (= empty success)."""
        body = await self._request(
            "POST", "getupdates", body={"get_updates_buf": cursor}, wait_secs=wait_secs
        )
        check_ret("getupdates", body)
        msgs = body.get("msgs") or []
        return UpdatesBatch(
            msgs=[m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else [],
            cursor=str(body["get_updates_buf"]) if body.get("get_updates_buf") else None,
            longpolling_timeout_ms=_as_int(body.get("longpolling_timeout_ms")),
        )

    async def send_text(
        self, *, to_user_id: str, client_id: str, text: str, context_token: str
    ) -> str | None:
        """Send one text item; returns the platform message id when given."""
        item = {"type": ITEM_TEXT, "text_item": {"text": text}}
        return await self.send_item(
            to_user_id=to_user_id, client_id=client_id, item=item, context_token=context_token
        )

    async def send_item(
        self, *, to_user_id: str, client_id: str, item: dict[str, Any], context_token: str
    ) -> str | None:
        """Send one item (text, image, file); returns the platform message id when given."""
        msg = {
            "from_user_id": "",
            "to_user_id": to_user_id,
            "client_id": client_id,
            "message_type": 2,
            "message_state": 2,
            "item_list": [item],
            "context_token": context_token,
        }
        body = await self._request("POST", "sendmessage", body={"msg": msg})
        check_ret("sendmessage", body)
        mid = body.get("message_id")
        return str(mid) if mid not in (None, "") else None

    async def get_upload_url(self, request: dict[str, Any]) -> str:
        """`getuploadurl`: the CDN upload parameter for one file (`request` as
        channels.wechat.upload builds it)."""
        body = await self._request("POST", "getuploadurl", body=request)
        check_ret("getuploadurl", body)
        param = body.get("upload_param")
        if not isinstance(param, str) or not param:
            raise ILinkTransportError("iLink getuploadurl: answer without upload_param")
        return param

    async def cdn_upload(self, url: str, data: bytes, wait_secs: float) -> str:
        """POST the encrypted bytes to the CDN; returns the download parameter
        the CDN answers in `x-encrypted-param` (what the message item names)."""
        client_timeout = aiohttp.ClientTimeout(total=wait_secs)
        headers = {"Content-Type": "application/octet-stream"}
        try:
            async with self._session.post(
                url, data=data, headers=headers, timeout=client_timeout
            ) as resp:
                if resp.status != 200:
                    raise ILinkHttpError(resp.status, "cdn upload")
                param = resp.headers.get("x-encrypted-param", "")
        except TimeoutError as exc:
            raise ILinkTransportError("cdn upload: timed out") from exc
        except aiohttp.ClientError as exc:
            raise ILinkTransportError(f"cdn upload: {type(exc).__name__}") from exc
        if not param:
            raise ILinkTransportError("cdn upload: answer without x-encrypted-param")
        return param

    async def get_config(self, user_id: str, context_token: str | None) -> ILinkConfig:
        """The user's typing ticket and, when the server issues one, a fresh context_token."""
        payload: dict[str, Any] = {"ilink_user_id": user_id}
        if context_token:
            payload["context_token"] = context_token
        body = await self._request("POST", "getconfig", body=payload)
        check_ret("getconfig", body)
        ticket, fresh = body.get("typing_ticket"), body.get("context_token")
        return ILinkConfig(str(ticket) if ticket else None, str(fresh) if fresh else None)

    async def send_typing(self, user_id: str, ticket: str, *, typing: bool) -> None:
        body = await self._request(
            "POST",
            "sendtyping",
            body={"ilink_user_id": user_id, "typing_ticket": ticket, "status": 1 if typing else 2},
        )
        check_ret("sendtyping", body)

    async def notify(self, started: bool) -> None:
        endpoint = "msg/notifystart" if started else "msg/notifystop"
        body = await self._request("POST", endpoint, body={})
        check_ret(endpoint, body)

    async def download(self, url: str, max_bytes: int, wait_secs: float) -> bytes:
        """GET raw bytes (CDN); refuses bodies over `max_bytes`."""
        client_timeout = aiohttp.ClientTimeout(total=wait_secs)
        try:
            async with self._session.get(url, timeout=client_timeout) as resp:
                if resp.status != 200:
                    raise ILinkHttpError(resp.status, "cdn download")
                return await read_capped(
                    resp.content.iter_chunked(CHUNK), max_bytes, declared=resp.content_length
                )
        except BodyTooLarge:
            raise ILinkError(f"cdn download: larger than {max_bytes} bytes") from None
        except TimeoutError as exc:
            raise ILinkTransportError("cdn download: timed out") from exc
        except aiohttp.ClientError as exc:
            raise ILinkTransportError(f"cdn download: {type(exc).__name__}") from exc
