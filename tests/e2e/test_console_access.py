"""Who may use the console's API (gateway/console/guard.py): every route
under /api/ops/, as mounted, attacked with no token, a wrong token, a
non-admin's named token and a page of another origin; an admin's named
token and the operator token get through. New views are covered as they
are mounted: the routes come from the running gateway, not from a list."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway

OPERATOR = "operator-console-token"
ALICE = "alice-named-token"  # websocket:alice is an admin
BOB = "bob-named-token"  # websocket:bob is not
API_KEY = "carol-api-key"  # api:carol is not


def _config(home: Path, llm: FakeOpenAI) -> object:
    return make_config(
        home,
        llm.base_url,
        gateway={"auth_token": OPERATOR, "admins": ["websocket:alice"]},
        channels={
            "websocket": {"tokens": {"alice": ALICE, "bob": BOB}},
            "api": {"enabled": True, "keys": {"carol": API_KEY}},
        },
    )


def _paths(gw: Gateway) -> list[tuple[str, str]]:
    """Each mounted console route with its parameters filled in."""
    filled = []
    for route in gw.console_routes:
        path = re.sub(r"\{(\w+)(:[^}]*)?\}", "1", route.path)
        filled.append((route.method, "/api/ops" + path))
    return filled


async def _status(
    http: aiohttp.ClientSession, method: str, url: str, token: str | None, **headers: str
) -> int:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with http.request(method, url, headers=headers, json={}) as response:
        return response.status


async def test_every_console_route_refuses_all_but_admins(home: Path, llm: FakeOpenAI) -> None:
    async with (
        running_gateway(_config(home, llm)) as gw,  # type: ignore[arg-type]
        aiohttp.ClientSession() as http,
    ):
        routes = _paths(gw)
        assert len(routes) >= 5
        assert ("GET", "/api/ops/whoami") in routes
        for method, path in [*routes, ("GET", "/api/ops/no-such-view")]:
            url = gw.base_url + path
            assert await _status(http, method, url, None) == 401, (method, path)
            assert await _status(http, method, url, "wrong") == 401, (method, path)
            assert await _status(http, method, url, BOB) == 403, (method, path)
            assert await _status(http, method, url, API_KEY) == 403, (method, path)
            evil = {"Origin": "https://evil.example"}
            assert await _status(http, method, url, OPERATOR, **evil) == 403, (method, path)
        for method, path in routes:
            if method != "GET":
                continue  # admins' actions are each view's own tests
            for token in (OPERATOR, ALICE):
                status = await _status(http, method, gw.base_url + path, token)
                assert status not in (401, 403), (path, status)

        async def whoami(token: str) -> object:
            headers = {"Authorization": f"Bearer {token}"}
            async with http.get(gw.base_url + "/api/ops/whoami", headers=headers) as r:
                return await r.json()

        assert await whoami(ALICE) == {"principal": "token:alice", "admin": True}
        assert await whoami(OPERATOR) == {"principal": "operator", "admin": True}


async def test_a_loopback_gateway_without_tokens_serves_the_local_operator(
    home: Path, llm: FakeOpenAI
) -> None:
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        aiohttp.ClientSession() as http,
        http.get(gw.base_url + "/api/ops/whoami") as response,
    ):
        assert response.status == 200
        assert await response.json() == {"principal": "operator", "admin": True}
