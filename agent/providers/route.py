"""What both SDK providers send and read without the SDK's per-call machinery.

The typed SDK calls (`chat.completions.create`, `messages.stream`) walk every
message and tool schema again to transform them and build a model per
streamed event; even `client.post` builds a request-options model, merges
headers and parses the URL on every call, and under it httpx builds a request
and a response object, merges headers and decodes them again, and hands the
body through three more layers to the aiohttp session that carries it. That
is most of a call's CPU on a small machine: more than the HTTP exchange
itself, and it bounds how many turns run at once. So a request goes out on
the aiohttp session of the SDK's own HTTP client (its aiohttp transport, or
the proxy's the environment names for that URL, as httpx would choose), with
the URL and headers the SDK and that HTTP client give it (the base URL,
`auth_headers`, `default_headers`, the HTTP client's own), worked out once
(`Route`); a streamed response is read as server-sent events of plain JSON
(agent.providers.events). What `post` adds beyond that are hooks for
credentials picobot never configures (a key callback, workload identity, a
provider runtime); the clients are always built with a fixed key. Tests hold
each provider's request equal to the one its SDK's `client.post` sends.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, cast

import aiohttp
import httpx2
import structlog
import yarl
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDict

from agent.providers.base import (
    REQUEST_HEADERS,
    ProviderError,
    ProviderSettings,
    ProviderUnavailable,
)
from agent.providers.retry import classify_status

__all__ = [
    "TRANSPORT_ERRORS",
    "Route",
    "Streaming",
    "Whole",
    "sdk_route",
    "transport_failure",
]

# What a request can fail with below HTTP: aiohttp's errors (its timeouts are
# TimeoutErrors too), TLS, and httpx's where the SDK's HTTP client still has a
# say (working out the route). `post` calls them all a connection error.
TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, ssl.SSLError, httpx2.RequestError)

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# a body this large goes out after the headers on its own (`_AfterHeaders`)
_ALONE_ABOVE: Final = 64 * 1024
_NO_CODING = frozenset({"", "identity"})  # Content-Encoding values that leave a body as it is

log = structlog.get_logger(__name__)


def transport_failure(exc: BaseException, provider: str) -> ProviderUnavailable:
    """One of TRANSPORT_ERRORS as the provider error tree has it: retried."""
    prefix = f"provider '{provider}'"
    if isinstance(exc, TimeoutError | httpx2.TimeoutException):
        return ProviderUnavailable(f"{prefix}: request timed out")
    return ProviderUnavailable(f"{prefix}: connection failed ({type(exc).__name__})")


class _SdkClient(Protocol):
    @property
    def base_url(self) -> httpx2.URL: ...

    @property
    def auth_headers(self) -> Mapping[str, str]: ...

    @property
    def default_headers(self) -> Mapping[str, object]: ...

    async def close(self) -> None: ...


class _AiohttpTransport(Protocol):
    """The SDKs' aiohttp transport for httpx (`_vendor.httpx_aiohttp`)."""

    client: object  # its session, once one was made
    proxy: httpx2.Proxy | None
    ssl_context: ssl.SSLContext
    limits: httpx2.Limits


def _session_of(transport: _AiohttpTransport) -> aiohttp.ClientSession:
    """The transport's session; made as it makes one (`get_client`), but
    with a cookie jar that, like httpx's, also keeps the cookies of a service
    addressed by its IP (a sticky load balancer's, a local server's). The
    transport holds it, so it is closed with the SDK client."""
    if not isinstance(transport.client, aiohttp.ClientSession):
        limits = transport.limits
        connector = aiohttp.TCPConnector(
            keepalive_timeout=limits.keepalive_expiry,
            ssl=transport.ssl_context,
            limit=100 if limits.max_connections is None else limits.max_connections,  # as it does
        )
        jar = aiohttp.CookieJar(unsafe=True)
        transport.client = aiohttp.ClientSession(connector=connector, cookie_jar=jar)
    return transport.client


@dataclass(frozen=True, slots=True)
class Whole:
    """A response read whole."""

    body: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Streaming:
    """A 2xx response whose body is still to read (agent.providers.events.read_events)."""

    headers: Mapping[str, str]
    pieces: AsyncIterator[bytes]  # the body's bytes as they come, decoded
    ended: Callable[[], bool]  # the body was read to its end
    release: Callable[[], Awaitable[None]]  # its connection reused if ended, else closed

    @classmethod
    def of_aiohttp(cls, response: aiohttp.ClientResponse) -> Streaming:
        """Of a response asked for with `auto_decompress=False` (`Route.stream`)."""

        pieces = _decoded(response)

        async def release() -> None:
            close = getattr(pieces, "aclose", None)  # httpx's decoding generator
            if close is not None:
                await close()
            response.release()

        return cls(response.headers, pieces, response.content.at_eof, release)

    @classmethod
    def of_httpx(cls, response: httpx2.Response) -> Streaming:
        return cls(
            response.headers,
            response.aiter_bytes(),
            lambda: response.is_stream_consumed,
            response.aclose,
        )


class _Raw(httpx2.AsyncByteStream):
    """A body's bytes as they came, for httpx to decode."""

    def __init__(self, pieces: AsyncIterator[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._pieces:
            yield piece


def _decoded(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The body's bytes, decoded as httpx (so the SDK) decodes them. aiohttp
    decodes a body only when its one Content-Encoding header names one
    coding; httpx decodes every coding each header lists (`gzip, identity`,
    `deflate, gzip`, a header repeated), the last applied first, and leaves
    one it does not know as it came. Most bodies have no coding: their bytes
    are passed on as they come, with no decoder in the way."""
    pieces = response.content.iter_any()
    values = response.headers.getall("Content-Encoding", ())
    if {coding.strip().lower() for value in values for coding in value.split(",")} <= _NO_CODING:
        return pieces
    # only the codings: httpx would refuse another header's value that is not ASCII
    headers = [("Content-Encoding", value) for value in values]
    return httpx2.Response(response.status, headers=headers, stream=_Raw(pieces)).aiter_bytes()


async def _body(reply: Streaming) -> bytes:
    """The whole body of `reply`, which is then released."""
    try:
        return b"".join([piece async for piece in reply.pieces])
    finally:
        await reply.release()


@dataclass(frozen=True, slots=True)
class _Wire:
    """Where a route's requests go below httpx, and with what."""

    session: aiohttp.ClientSession
    url: yarl.URL
    headers: CIMultiDict[str]
    proxy: str | None
    proxy_headers: Mapping[str, str] | None  # its credentials among them


class Route:
    """An SDK client, its HTTP client, and where and how requests to `path`
    go: the URL and headers `client.post` would send them with."""

    def __init__(
        self, client: _SdkClient, http: httpx2.AsyncClient, path: str, timeout: httpx2.Timeout
    ) -> None:
        self.client = client
        self.http = http
        base = client.base_url
        root = base.raw_path if base.raw_path.endswith(b"/") else base.raw_path + b"/"
        self.url = base.copy_with(raw_path=root + path.lstrip("/").encode())
        self._timeout = timeout
        # as the SDK's aiohttp transport turns httpx's timeouts into aiohttp's
        self._client_timeout = aiohttp.ClientTimeout(
            sock_connect=timeout.connect, sock_read=timeout.read, connect=timeout.pool
        )
        self._wire: _Wire | None = None
        self._redirects = False  # the endpoint answered with a redirect once

    def _headers(self) -> httpx2.Headers:
        # what `post` puts first, so that `extra_headers` may override it
        headers = httpx2.Headers({"X-Stainless-Retry-Count": "0"})  # a first attempt
        headers["X-Stainless-Read-Timeout"] = str(self._timeout.read)
        client = self.client
        for name, value in (*client.auth_headers.items(), *client.default_headers.items()):
            if isinstance(value, str):  # not `Omit`
                headers[name] = value  # any case; the later one wins, as in `post`
        return headers

    @property
    def wire(self) -> _Wire:
        """Worked out at the first request, on the event loop: the SDK names
        the async library it runs under in a header, and the session is made
        on the loop it serves."""
        if self._wire is None:
            # the HTTP client's own headers and cookies merged in, as for `post`;
            # aiohttp counts the body's length itself
            request = self.http.build_request("POST", self.url, headers=self._headers())
            headers = CIMultiDict(request.headers.multi_items())
            headers.popall("Content-Length", None)
            # the proxy's transport where the environment names one for the URL
            transport = cast(_AiohttpTransport, self.http._transport_for_url(self.url))
            if not hasattr(transport, "ssl_context"):
                raise ProviderError(f"the SDK's HTTP client is not aiohttp's ({type(transport)})")
            proxy = transport.proxy
            proxy_headers = dict(proxy.headers) if proxy else None
            if proxy and proxy.auth and proxy_headers is not None:
                # on the CONNECT that opens a TLS tunnel, else on the request itself
                credentials = aiohttp.encode_basic_auth(*proxy.auth)
                on = proxy_headers if self.url.scheme == "https" else headers
                on["Proxy-Authorization"] = credentials
            self._wire = _Wire(
                session=_session_of(transport),
                url=yarl.URL(str(request.url), encoded=True),
                headers=headers,
                proxy=str(proxy.url) if proxy else None,
                proxy_headers=proxy_headers,
            )
        return self._wire

    async def close(self) -> None:
        await self.client.close()  # and the HTTP client it was given, and its session

    async def post(self, provider: str, body: bytes) -> Whole:
        """The whole response to `body`, its connection released."""
        reply = await self.stream(provider, body)
        return Whole(await _body(reply), reply.headers)

    async def stream(self, provider: str, body: bytes) -> Streaming:
        """The response to `body`, its body still to read (`events.read_events`).
        Any other status than 2xx raises as the provider error tree has it
        (`classify_status`). An endpoint that redirects is from then on sent
        to through the SDK's HTTP client, which follows redirects by its
        rules: the headers of the next hop (the key kept only within the
        origin or from http to https, `Host` rewritten) and the proxy for
        each hop's URL."""
        if self._redirects:
            return await self._followed(provider, body)
        wire = self.wire
        headers = wire.headers
        if (added := REQUEST_HEADERS.get()) is not None:
            headers = headers.copy()
            headers.update(added)
        response = await wire.session.request(
            "POST",
            wire.url,
            headers=headers,
            data=_AfterHeaders(body) if len(body) > _ALONE_ABOVE else body,
            timeout=self._client_timeout,
            proxy=wire.proxy,
            proxy_headers=wire.proxy_headers,
            allow_redirects=False,
            auto_decompress=False,  # decoded as httpx decodes (`_decoded`)
        )
        if 200 <= response.status < 300:
            return Streaming.of_aiohttp(response)
        if response.status in _REDIRECTS and "Location" in response.headers:
            response.release()
            self._redirects = True
            location = response.headers["Location"]
            log.warning("provider_redirects", provider=provider, location=location[:200])
            return await self._followed(provider, body)
        try:
            raw = await _body(Streaming.of_aiohttp(response))
        except httpx2.DecodingError:
            raw = b""  # its status still says why
        raise _refused(provider, response.status, response.headers, raw)

    async def _followed(self, provider: str, body: bytes) -> Streaming:
        headers = self._headers()
        headers.update(REQUEST_HEADERS.get() or {})
        request = self.http.build_request("POST", self.url, headers=headers, content=body)
        response = await self.http.send(request, stream=True)
        if response.is_success:
            return Streaming.of_httpx(response)
        try:
            raw = await response.aread()
        except httpx2.DecodingError:
            raw = b""  # its status still says why
        finally:
            await response.aclose()
        raise _refused(provider, response.status_code, response.headers, raw)


class _AfterHeaders(aiohttp.Payload):
    """A large request body, written after the headers as it is (a view of
    the bytes). Given bytes, aiohttp writes the headers and the body in one
    buffer, which below Python 3.12.9 it joins (it does not use `writelines`
    there): a copy of the whole body on every call. Sent this way, with one
    more `send` for the headers alone, a turn at 8,000 messages of history
    (a 400 KB body) cost 0.5–0.75 ms less, 8–14 % (`python -m bench.paired
    --history 8000`, six runs; the same code on both: 0.98–1.04). A small
    body keeps the one write."""

    _autoclose = True  # bytes in memory: nothing to close, sent again as they are

    def __init__(self, body: bytes) -> None:
        super().__init__(body)  # its Content-Type as bytes get: the request names its own
        self._view = memoryview(body)
        self._size = len(body)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        writer.send_headers()
        await writer.write(self._view if content_length is None else self._view[:content_length])

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self._view).decode(encoding, errors)


def _refused(provider: str, status: int, headers: Mapping[str, str], raw: bytes) -> ProviderError:
    error: object
    try:
        error = json.loads(raw)
    except ValueError:
        error = raw.decode(errors="replace").strip()
    return classify_status(provider, status, dict(headers), error)


def sdk_route(
    client: Callable[..., _SdkClient],
    http: Callable[..., httpx2.AsyncClient],
    settings: ProviderSettings,
    path: str,
) -> Route:
    """A route on an SDK's client class and its aiohttp HTTP client class
    (`DefaultAioHttpClient`), built with the provider's fixed key; the SDK's
    retries off."""
    timeout = httpx2.Timeout(settings.timeout_secs)
    transport = http(timeout=timeout)
    sdk = client(
        api_key=settings.api_key,
        base_url=settings.base_url,
        default_headers=settings.extra_headers or None,
        timeout=timeout,
        max_retries=0,
        http_client=transport,
    )
    return Route(sdk, transport, path, timeout)
