"""The outbound address policy for the web tools, and the one HTTP client that honours it.

`guarded_fetch` is the only way the web tools reach the network. Every hop
(the first URL and each redirect, at most `MAX_REDIRECTS`) is vetted: the scheme
must be http(s) and every address the host resolves to must be public unless
`allow_private`. The connection is then made to exactly the vetted addresses
(a pinned resolver), so a DNS answer that changes between check and connect
(rebinding) cannot redirect it. Responses are read up to a byte cap. Proxies
from the environment are never used (they would bypass the check).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from agent.tools.base import ToolError

__all__ = [
    "MAX_REDIRECTS",
    "AddressPolicy",
    "FetchedResponse",
    "IPNetwork",
    "PinnedResolver",
    "VettedTarget",
    "guarded_fetch",
    "vet_url",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_REDIRECTS = 5
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_CREDENTIAL_HEADERS = ("Authorization", "Proxy-Authorization", "Cookie")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_READ_CHUNK = 65_536


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64), else `ip`."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Which addresses the web tools may connect to.

    `exempt` networks are always allowed (an operator allow-list, e.g. one
    intranet service, without opening every private range).
    """

    allow_private: bool = False
    exempt: tuple[IPNetwork, ...] = ()

    def refusal(self, ip: IPAddress) -> str | None:
        """Why `ip` is refused, or None when it may be contacted."""
        if self.allow_private or any(ip in net for net in self.exempt):
            return None
        inner = _embedded_ipv4(ip)
        for addr in (inner, ip):  # the embedded IPv4 gives the more telling reason
            if addr.is_unspecified:
                return "unspecified"
            if addr.is_loopback:
                return "loopback"
            if addr.is_link_local:
                return "link-local"
            if addr.is_multicast:
                return "multicast"
            if addr.is_reserved:
                return "reserved"
            if addr.is_private:
                return "private"
            if not addr.is_global:
                return "non-public"
        return None


@dataclass(frozen=True, slots=True)
class VettedTarget:
    url: URL
    host: str  # normalised: lower case, no trailing dot
    addresses: tuple[tuple[socket.AddressFamily, str], ...]


def _normalise_host(host: str) -> str:
    return host.rstrip(".").lower()


def _parse_ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


async def vet_url(url: str | URL, policy: AddressPolicy) -> VettedTarget:
    """Check scheme and every resolved address of `url`'s host; raise ToolError if refused."""
    try:
        parsed = URL(url) if isinstance(url, str) else url
    except ValueError:
        raise ToolError(f"invalid URL {str(url)!r}") from None
    if parsed.scheme not in ("http", "https"):
        raise ToolError(f"URL scheme {parsed.scheme or '(none)'!r} is not allowed; use http(s)")
    host = parsed.raw_host
    if not host or parsed.port is None:
        raise ToolError(f"URL {str(url)!r} has no host")
    literal = _parse_ip(host)
    if literal is not None:
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        found = [(family, str(literal))]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, parsed.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        except (socket.gaierror, UnicodeError):
            raise ToolError(f"cannot resolve host {host!r}") from None
        found = list(dict.fromkeys((info[0], str(info[4][0])) for info in infos))
    if not found:
        raise ToolError(f"cannot resolve host {host!r}")
    for _, address in found:
        ip = _parse_ip(address)
        reason = "unparseable" if ip is None else policy.refusal(ip)
        if reason is not None:
            raise ToolError(
                f"refusing to connect to {host} ({address}): {reason} address "
                "(private network access is disabled)"
            )
    return VettedTarget(parsed, _normalise_host(host), tuple(found))


class PinnedResolver(AbstractResolver):
    """Answers only for the vetted host, with exactly the vetted addresses."""

    def __init__(self, target: VettedTarget) -> None:
        self._target = target

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if _normalise_host(host) != self._target.host:
            raise OSError(f"host {host!r} was not vetted")
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=fam,
                proto=socket.IPPROTO_TCP,
                flags=socket.AI_NUMERICHOST,
            )
            for fam, address in self._target.addresses
            if family in (socket.AF_UNSPEC, fam)
        ]

    async def close(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class FetchedResponse:
    url: str
    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    body: bytes
    truncated: bool
    charset: str | None
    redirects: tuple[str, ...] = field(default=())

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()

    def text(self) -> str:
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # unknown charset name from the server
            return self.body.decode("utf-8", errors="replace")


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    body = bytearray()
    async for chunk in response.content.iter_chunked(_READ_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _same_origin(a: URL, b: URL) -> bool:
    return (a.scheme, a.raw_host, a.port) == (b.scheme, b.raw_host, b.port)


def _redirected_request(status: int, method: str, body: str | None) -> tuple[str, str | None]:
    """Method and body for the next hop, as browsers do it."""
    if status == 303 and method != "HEAD":
        return "GET", None
    if status in (301, 302) and method == "POST":
        return "GET", None
    return method, body


async def guarded_fetch(
    method: str,
    url: str,
    *,
    policy: AddressPolicy,
    timeout_secs: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
) -> FetchedResponse:
    """One HTTP exchange under the address policy, following up to MAX_REDIRECTS."""
    request_headers = CIMultiDict(headers or {})
    current: str | URL = url
    redirects: list[str] = []
    try:
        async with asyncio.timeout(timeout_secs):
            for _ in range(MAX_REDIRECTS + 1):
                target = await vet_url(current, policy)
                connector = aiohttp.TCPConnector(
                    resolver=PinnedResolver(target), use_dns_cache=False, force_close=True
                )
                async with (
                    aiohttp.ClientSession(connector=connector, trust_env=False) as session,
                    session.request(
                        method,
                        target.url,
                        headers=request_headers,
                        data=body.encode("utf-8") if body is not None else None,
                        allow_redirects=False,
                    ) as response,
                ):
                    location = response.headers.get("Location")
                    if response.status in _REDIRECT_STATUSES and location:
                        try:
                            nxt = target.url.join(URL(location))
                        except ValueError:
                            raise ToolError(f"invalid redirect location {location!r}") from None
                        if not _same_origin(target.url, nxt):
                            for name in _CREDENTIAL_HEADERS:
                                request_headers.popall(name, None)
                        new_method, body = _redirected_request(response.status, method, body)
                        if new_method != method:
                            for name in ("Content-Type", "Content-Length"):
                                request_headers.popall(name, None)
                        method = new_method
                        redirects.append(str(nxt))
                        current = nxt
                        continue
                    content, truncated = await _read_capped(response, max_bytes)
                    return FetchedResponse(
                        url=str(response.url),
                        status=response.status,
                        reason=response.reason or "",
                        headers=response.headers,
                        body=content,
                        truncated=truncated,
                        charset=response.charset,
                        redirects=tuple(redirects),
                    )
            raise ToolError(f"too many redirects (more than {MAX_REDIRECTS})")
    except TimeoutError:
        raise ToolError(f"request timed out after {timeout_secs:g}s") from None
    except aiohttp.ClientError as exc:
        raise ToolError(f"request failed: {type(exc).__name__}: {exc}") from None
