"""QR login for the WeChat channel: the flow behind `picobot channels login wechat`.

Shows the QR code in the terminal as text, follows every status iLink reports
(wait, scaned, confirmed, expired, scaned_but_redirect, need_verifycode,
verify_code_blocked, binded_redirect) and saves the credentials (mode 0600).
It talks only to the operator's terminal (`out`, `prompt`); it never prints or
logs the bot token.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import aiohttp
import qrcode

from channels.wechat.api import ILinkClient, ILinkError, ILinkRetError
from channels.wechat.config import WechatConfig
from channels.wechat.credentials import (
    Credentials,
    default_home,
    load_credentials,
    resolve_cred_path,
    save_credentials,
)

__all__ = ["LoginError", "login", "render_qr"]

Prompt = Callable[[str], Awaitable[str]]

_STATUS_TEXT = {
    "wait": "Waiting for the QR code to be scanned…",
    "scaned": "Scanned. Confirm the login in WeChat on your phone…",
    "need_verifycode": "WeChat asks for the verification code shown on your phone.",
}


class LoginError(Exception):
    """The QR login did not succeed; the message says why and what to do."""


def render_qr(data: str) -> str:
    """The QR code as terminal text (half-block characters)."""
    qr = qrcode.QRCode(border=1)
    qr.add_data(data)
    qr.make(fit=True)
    buf = io.StringIO()
    qr.print_ascii(out=buf, invert=True)
    return buf.getvalue()


async def login(
    config: WechatConfig,
    *,
    out: TextIO,
    prompt: Prompt,
    home: Path | None = None,
) -> Credentials:
    """Log the bot in by QR code and save the credentials; returns them.

    Saved credentials that are still valid are returned as they are unless
    `config.force_login` is set (or the channel marked them expired).
    """
    path = resolve_cred_path(config.cred_path, home or default_home())
    existing = await asyncio.to_thread(load_credentials, path)
    if existing is not None and not existing.expired and not config.force_login:
        print(
            f"Already logged in as {existing.ilink_bot_id or 'the saved bot'} "
            f"(credentials in {path}). Set channels.wechat.force_login to log in again.",
            file=out,
        )
        return existing
    async with aiohttp.ClientSession() as session:
        client = ILinkClient(session, config.base_url, request_timeout=config.request_timeout_secs)
        creds = await _QrLogin(client, config, out, prompt, existing).run()
    saved = await asyncio.to_thread(save_credentials, path, creds)
    print(f"Logged in as {saved.ilink_bot_id}. Credentials saved to {path}.", file=out)
    return saved


class _QrLogin:
    def __init__(
        self,
        client: ILinkClient,
        config: WechatConfig,
        out: TextIO,
        prompt: Prompt,
        existing: Credentials | None,
    ) -> None:
        self._client = client
        self._config = config
        self._out = out
        self._prompt = prompt
        self._existing = existing
        self._scheme = urlsplit(config.base_url).scheme or "https"

    def _say(self, text: str) -> None:
        print(text, file=self._out, flush=True)

    async def _new_qr(self) -> str:
        tokens = [self._existing.bot_token] if self._existing else []
        try:
            try:
                body = await self._client.get_bot_qrcode(tokens)
            except ILinkRetError:
                if not tokens:
                    raise
                # An expired token in local_token_list is refused (ret -3): the
                # saved login is what we are replacing, so ask without it.
                body = await self._client.get_bot_qrcode([])
        except (ILinkError, TimeoutError) as exc:
            raise LoginError(f"cannot get a login QR code from iLink: {exc}") from None
        qr_id = str(body.get("qrcode") or "")
        content = str(body.get("qrcode_img_content") or "")
        if not qr_id:
            raise LoginError("iLink returned no QR code")
        self._say("Scan this QR code with WeChat to log the bot in:")
        if content:
            self._say(render_qr(content))
            self._say(f"(or open {content})")
        return qr_id

    async def run(self) -> Credentials:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.login_timeout_secs
        refreshes = 0
        qr_id = await self._new_qr()
        verify_code: str | None = None
        last_status = ""
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise LoginError(
                    f"QR login timed out after {self._config.login_timeout_secs:.0f} s; "
                    "run `picobot channels login wechat` again"
                )
            body = await self._poll(qr_id, verify_code, remaining)
            status = str(body.get("status") or "wait")
            if status != last_status and status in _STATUS_TEXT:
                self._say(_STATUS_TEXT[status])
            last_status = status
            if status == "confirmed":
                return self._credentials(body)
            if status in ("expired", "verify_code_blocked"):
                what = "expired" if status == "expired" else "verification was blocked"
                if refreshes >= self._config.qr_max_refreshes:
                    raise LoginError(
                        f"the QR code {what} and was refreshed {refreshes} times already; "
                        "run `picobot channels login wechat` again"
                    )
                refreshes += 1
                self._say(
                    f"The QR code {what}; a new one ({refreshes}/{self._config.qr_max_refreshes}):"
                )
                qr_id = await self._new_qr()
                verify_code = None
                last_status = ""
                continue
            if status == "scaned_but_redirect":
                host = str(body.get("redirect_host") or "")
                if host:
                    self._client.with_base_url(f"{self._scheme}://{host}")
            elif status == "need_verifycode":
                verify_code = (await self._prompt("Verification code: ")).strip() or None
                continue
            elif status == "binded_redirect":
                return self._already_bound(body)
            await asyncio.sleep(self._config.qr_poll_interval_secs)

    async def _poll(self, qr_id: str, verify_code: str | None, remaining: float) -> dict[str, Any]:
        timeout = min(self._config.qr_status_timeout_secs, remaining)
        try:
            return await self._client.get_qrcode_status(
                qr_id, verify_code=verify_code, wait_secs=timeout
            )
        except TimeoutError:
            return {"status": "wait"}  # the status call is itself a long poll
        except ILinkError:
            # Gateway hiccups count as "wait"; the overall deadline bounds them.
            await asyncio.sleep(self._config.qr_poll_interval_secs)
            return {"status": "wait"}

    def _credentials(self, body: dict[str, Any]) -> Credentials:
        token = str(body.get("bot_token") or "")
        if not token:
            raise LoginError("iLink confirmed the login but sent no bot token")
        baseurl = str(body.get("baseurl") or "") or self._client.base_url
        if "://" not in baseurl:
            baseurl = f"{self._scheme}://{baseurl}"
        return Credentials(
            bot_token=token,
            ilink_bot_id=str(body.get("ilink_bot_id") or ""),
            baseurl=baseurl.rstrip("/"),
            ilink_user_id=str(body.get("ilink_user_id") or ""),
        )

    def _already_bound(self, body: dict[str, Any]) -> Credentials:
        """binded_redirect: the bot is bound already; no new credentials are issued."""
        if body.get("bot_token"):
            return self._credentials(body)
        if self._existing is not None:
            self._say("This WeChat account is already bound to the bot; keeping the saved login.")
            return Credentials(
                bot_token=self._existing.bot_token,
                ilink_bot_id=self._existing.ilink_bot_id,
                baseurl=self._existing.baseurl,
                ilink_user_id=self._existing.ilink_user_id,
            )
        raise LoginError(
            "WeChat says this account is already bound to a bot, but no saved credentials "
            "exist here; unbind the bot in WeChat and log in again"
        )
