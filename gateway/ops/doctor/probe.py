"""`picobot doctor --probe`: call each used provider's and enabled channel's
API once, with a short timeout, and say whether the credentials work. No
secret is ever printed: each is masked in the reasons given."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from channels.base import ChannelSettings
from gateway.config.core import ProviderConfig
from gateway.config.loading import LoadedConfig
from gateway.ops.doctor.findings import Finding, ok, problem, secret_of, warn
from gateway.ops.logging import redact_text

__all__ = ["DEFAULT_BASE", "probe_all", "used_providers"]

DEFAULT_BASE = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


def used_providers(loaded: LoadedConfig) -> list[str]:
    return sorted({agent.provider for agent in loaded.config.agents.values()})


async def probe_all(loaded: LoadedConfig, timeout_secs: float) -> list[Finding]:
    config = loaded.config
    client_timeout = aiohttp.ClientTimeout(total=timeout_secs)
    async with aiohttp.ClientSession(timeout=client_timeout, trust_env=True) as http:
        probes: list[Awaitable[Finding]] = []
        for name in used_providers(loaded):
            probes.append(_probe_provider(http, name, config.providers[name]))
        for name, section in config.channels.enabled().items():
            if name == "telegram":
                probes.append(_probe_telegram(http, section))
            elif name == "feishu":
                probes.append(_probe_feishu(http, section))
            elif name == "wechat":
                probes.append(_probe_wechat(http, section))
            elif name == "wecom_kf":
                probes.append(_probe_wecom_kf(http, section))
        return list(await asyncio.gather(*probes))


async def _request(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, Any] | str:
    """(status, JSON body or None), or the reason it could not be reached."""
    try:
        async with http.request(method, url, **kwargs) as response:
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
            return response.status, body
    except TimeoutError:
        return "no answer within the timeout"
    except aiohttp.ClientError as exc:
        return redact_text(str(exc) or type(exc).__name__)


def _hide(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _unreachable(check: str, where: str, reason: str) -> Finding:
    return problem(check, f"cannot reach {where}: {reason}", "check the URL, DNS, proxy, firewall")


async def _probe_provider(http: aiohttp.ClientSession, name: str, p: ProviderConfig) -> Finding:
    check = f"probe provider {name}"
    key = p.api_key.get_secret_value()
    if p.type == "anthropic":
        base = (p.base_url or DEFAULT_BASE["anthropic"]).rstrip("/")
        url = f"{base}/v1/models"
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    else:
        base = (p.base_url or DEFAULT_BASE["openai"]).rstrip("/")
        url = f"{base}/models"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
    result = await _request(http, "GET", url, headers={**p.extra_headers, **headers})
    if isinstance(result, str):
        return _unreachable(check, base, _hide(result, key))
    status, _body = result
    if status == 200:
        return ok(check, f"{base} answered, api_key accepted")
    if status in (401, 403):
        return problem(check, f"{base} rejected the api_key (HTTP {status})", "check the key")
    return warn(check, f"{base} is reachable but GET {urlsplit(url).path} gave HTTP {status}")


async def _probe_telegram(http: aiohttp.ClientSession, section: ChannelSettings) -> Finding:
    token = secret_of(getattr(section, "token", ""))
    base = str(getattr(section, "api_base", "https://api.telegram.org")).rstrip("/")
    result = await _request(http, "POST", f"{base}/bot{token}/getMe")
    if isinstance(result, str):
        return _unreachable("probe telegram", base, _hide(result, token))
    status, body = result
    if status == 200 and isinstance(body, dict) and body.get("ok"):
        username = (body.get("result") or {}).get("username", "?")
        return ok("probe telegram", f"the token belongs to @{username}")
    if status in (401, 404):
        message = f"the token was rejected (HTTP {status})"
        return problem("probe telegram", message, "check it with @BotFather")
    return warn("probe telegram", f"{base} answered getMe with HTTP {status}")


async def _probe_feishu(http: aiohttp.ClientSession, section: ChannelSettings) -> Finding:
    base = str(getattr(section, "base_url", "https://open.feishu.cn")).rstrip("/")
    payload = {
        "app_id": getattr(section, "app_id", ""),
        "app_secret": secret_of(getattr(section, "app_secret", "")),
    }
    url = f"{base}/open-apis/auth/v3/tenant_access_token/internal"
    result = await _request(http, "POST", url, json=payload)
    if isinstance(result, str):
        return _unreachable("probe feishu", base, result)
    status, body = result
    code = body.get("code") if isinstance(body, dict) else None
    if status == 200 and code == 0:
        return ok("probe feishu", f"{base} issued a tenant token for the app")
    if code is not None:
        message = f"credentials rejected (code {code}: {redact_text(str(body.get('msg')))})"
        return problem("probe feishu", message, "check app_id and app_secret")
    return warn("probe feishu", f"{base} answered HTTP {status}")


async def _probe_wechat(http: aiohttp.ClientSession, section: ChannelSettings) -> Finding:
    base = str(getattr(section, "base_url", "https://ilinkai.weixin.qq.com")).rstrip("/")
    result = await _request(http, "GET", base)
    if isinstance(result, str):
        return _unreachable("probe wechat", base, result)
    return ok("probe wechat", f"{base} is reachable (HTTP {result[0]})")


async def _probe_wecom_kf(http: aiohttp.ClientSession, section: ChannelSettings) -> Finding:
    base = str(getattr(section, "api_base", "https://qyapi.weixin.qq.com")).rstrip("/")
    secret = secret_of(getattr(section, "secret", ""))
    params = {"corpid": str(getattr(section, "corp_id", "")), "corpsecret": secret}
    result = await _request(http, "GET", f"{base}/cgi-bin/gettoken", params=params)
    if isinstance(result, str):
        return _unreachable("probe wecom_kf", base, _hide(result, secret))
    status, body = result
    errcode = body.get("errcode") if isinstance(body, dict) else None
    if status == 200 and errcode == 0 and body.get("access_token"):
        return ok("probe wecom_kf", f"{base} issued an access token for the corp")
    if errcode is not None:
        message = (
            f"credentials rejected (errcode {errcode}: {redact_text(str(body.get('errmsg')))})"
        )
        return problem("probe wecom_kf", message, "check corp_id and secret (微信客服 Secret)")
    return warn("probe wecom_kf", f"{base} answered gettoken with HTTP {status}")
