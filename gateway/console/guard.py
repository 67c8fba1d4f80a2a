"""Who may use the console: admins only, decided on the server for every
request under `/api/ops/`.

An admin in the browser is
- the holder of the operator token (`gateway.auth_token`), or, when the
  gateway has no token of any kind and is bound to loopback, whoever reaches
  it (the local operator, as for `/ws`);
- the holder of a named token (`channels.websocket.tokens`,
  `channels.api.keys`) whose sender is in `gateway.admins`, written
  `websocket:<name>` or `api:<name>` like any other sender.

Any other named token is a known principal and gets 403; a missing or wrong
token gets 401; a page of another origin gets 403 whatever it carries. Tokens
are compared in constant time, every one of them, so the time taken does not
say which matched.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from channels.base import origin_allowed

__all__ = ["NEEDS_TOKEN", "OPERATOR", "Guard", "NamedToken", "Principal", "Refusal"]

OPERATOR: Final = "operator"
NEEDS_TOKEN: Final = (
    "the operator API needs gateway.auth_token when gateway.host is not a loopback address"
)


@dataclass(frozen=True, slots=True)
class NamedToken:
    channel: str  # the channel whose sender the holder is: "websocket", "api"
    name: str  # the sender id
    secret: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: `operator` or `token:<name>`, and whether an admin."""

    name: str
    admin: bool


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int  # 401 or 403
    error: str


class Guard:
    def __init__(
        self,
        master: str | None,
        named: Sequence[NamedToken],
        is_admin: Callable[[str, str], bool],  # (channel, sender id)
        allowed_origins: tuple[str, ...] = (),
        *,
        exposed: bool = False,  # gateway.host is not a loopback address
    ) -> None:
        self._master = master.encode() if master else None
        self._named = [(t, t.secret.encode()) for t in named if t.secret]
        self._is_admin = is_admin
        self._origins = allowed_origins
        self._exposed = exposed

    def judge(self, request: web.Request) -> Principal | Refusal:
        """The principal behind `request`, or why it is refused."""
        if not origin_allowed(request, self._origins):
            return Refusal(403, "cross-origin request refused")
        if self._master is None and not self._named:
            if self._exposed:
                return Refusal(403, NEEDS_TOKEN)
            return Principal(OPERATOR, admin=True)
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return Refusal(401, "unauthorized")
        token = given.strip().encode("utf-8", "surrogatepass")
        found: Principal | None = None
        for named, secret in self._named:
            if hmac.compare_digest(token, secret) and found is None:
                admin = self._is_admin(named.channel, named.name)
                found = Principal(f"token:{named.name}", admin)
        if self._master is not None and hmac.compare_digest(token, self._master):
            found = Principal(OPERATOR, admin=True)
        return found or Refusal(401, "unauthorized")
