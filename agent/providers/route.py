"""What both SDK providers send and read without the SDK's per-call machinery.

The typed SDK calls (`chat.completions.create`, `messages.stream`) walk every
message and tool schema again to transform them and build a model per
streamed event; even `client.post` builds a request-options model, merges
headers and parses the URL on every call. That is most of a call's CPU on a
small machine: more than the HTTP exchange itself, and it bounds how many
turns run at once. So a request goes out on the SDK's own HTTP client (its
aiohttp transport) with the URL and headers the SDK gives that client (its
base URL, `auth_headers`, `default_headers`), worked out once (`Route`), and
a streamed response is read here as server-sent events of plain JSON
(`SseEvents`, `read_events`). What `post` adds beyond that are hooks for
credentials picobot never configures (a key callback, workload identity, a
provider runtime); the clients are always built with a fixed key. Tests hold
each provider's request equal to the one its SDK's `client.post` sends.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import aiohttp
import httpx2

from agent.providers.base import ProviderSettings, ProviderUnavailable
from agent.providers.retry import classify_status
from agent.providers.sdk import drain_briefly

__all__ = [
    "TRANSPORT_ERRORS",
    "Route",
    "SseEvent",
    "SseEvents",
    "read_events",
    "sdk_route",
    "transport_failure",
]

# What a request can fail with below HTTP: httpx's errors (the SDK transport
# maps most of aiohttp's onto them), TLS, and the aiohttp errors it leaves
# unmapped (a malformed status line or header). `post` calls them all a
# connection error.
TRANSPORT_ERRORS = (httpx2.RequestError, ssl.SSLError, aiohttp.ClientError)

# (event name, data): the name is "" where the event has none
SseEvent = tuple[str, str]


def transport_failure(exc: BaseException, provider: str) -> ProviderUnavailable:
    """One of TRANSPORT_ERRORS as the provider error tree has it: retried."""
    prefix = f"provider '{provider}'"
    if isinstance(exc, httpx2.TimeoutException):
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


class Route:
    """An SDK client, its HTTP client, and where and how requests to `path`
    go: the URL and headers `client.post` would build for them."""

    def __init__(
        self, client: _SdkClient, http: httpx2.AsyncClient, path: str, timeout: httpx2.Timeout
    ) -> None:
        self.client = client
        self.http = http
        base = client.base_url
        root = base.raw_path if base.raw_path.endswith(b"/") else base.raw_path + b"/"
        self.url = base.copy_with(raw_path=root + path.lstrip("/").encode())
        self._timeout = timeout
        self._headers: httpx2.Headers | None = None

    @property
    def headers(self) -> httpx2.Headers:
        """Worked out at the first request, on the event loop: the SDK names
        the async library it runs under in one of them."""
        if self._headers is None:
            # what `post` puts first, so that `extra_headers` may override it
            headers = httpx2.Headers({"X-Stainless-Retry-Count": "0"})  # a first attempt
            headers["X-Stainless-Read-Timeout"] = str(self._timeout.read)
            client = self.client
            for name, value in (*client.auth_headers.items(), *client.default_headers.items()):
                if isinstance(value, str):  # not `Omit`
                    headers[name] = value  # any case; the later one wins, as in `post`
            self._headers = headers
        return self._headers

    async def close(self) -> None:
        await self.client.close()  # and the HTTP client it was given

    async def send(self, provider: str, body: bytes, *, stream: bool) -> httpx2.Response:
        """The response to `body`, streamed or read whole; any other status than
        2xx raises as the provider error tree has it (`classify_status`)."""
        # the HTTP client's own headers and cookies merged in, as for `post`
        request = self.http.build_request("POST", self.url, headers=self.headers, content=body)
        response = await self.http.send(request, stream=stream)
        if response.is_success:
            return response
        try:
            raw = await response.aread()
        finally:
            await response.aclose()
        error: object
        try:
            error = json.loads(raw)
        except ValueError:
            error = raw.decode(errors="replace").strip()
        raise classify_status(provider, response.status_code, dict(response.headers), error)


def sdk_route(
    client: Callable[..., _SdkClient],
    http: Callable[..., httpx2.AsyncClient],
    settings: ProviderSettings,
    path: str,
) -> Route:
    """A route on an SDK's client class and its aiohttp HTTP client class
    (`DefaultAioHttpClient`: a fraction of httpx's own transport's CPU per
    request), built with the provider's fixed key; the SDK's retries off."""
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


class SseEvents:
    """Each server-sent event (its name and data), from the stream's bytes as
    they come. Lines end with LF, CRLF or CR (a CR that ends a piece waits for
    the next, which may begin with its LF) and are UTF-8, as the format
    requires; httpx's `aiter_lines` would read the charset from the headers
    on every call and decode through two more layers. An event with no data
    (a keep-alive's bare `data:`) is not one, as the format says."""

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # the line so far, in pieces
        self._cr = b""  # a CR that ended the last piece
        self._data: list[str] = []
        self._name = ""

    def feed(self, piece: bytes) -> list[SseEvent]:
        text = self._cr + piece  # only the new bytes are scanned: a long line costs once
        self._cr = b"\r" if text.endswith(b"\r") else b""
        lines = text[: len(text) - len(self._cr)].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        parts = lines.split(b"\n")
        if len(parts) == 1:
            self._partial.append(parts[0])
            return []
        parts[0] = b"".join([*self._partial, parts[0]])
        self._partial = [parts.pop()]
        return self._take(parts)

    def end(self) -> list[SseEvent]:
        """What an unterminated last event carried."""
        rest = b"".join(self._partial)
        self._partial, self._cr = [], b""
        return self._take([rest, b""] if rest else [b""])

    def _take(self, lines: list[bytes]) -> list[SseEvent]:
        events: list[SseEvent] = []
        for raw in lines:
            if raw.startswith(b"data:"):
                self._data.append(raw[5:].removeprefix(b" ").decode(errors="replace"))
            elif raw.startswith(b"event:"):
                self._name = raw[6:].strip().decode(errors="replace")
            elif not raw:  # an empty line ends the event
                data = "\n".join(self._data)
                if data:
                    events.append((self._name, data))
                self._data.clear()
                self._name = ""
        return events


async def read_events(
    response: httpx2.Response, dispatch: Callable[[str, str], Awaitable[bool]]
) -> bool:
    """Hand each event (name, data) of a streamed `response` to `dispatch`
    until it says the reply is whole (True); then read the body's end,
    briefly (`drain_briefly`), so the connection can be reused. Nothing after
    that event counts. False: the body ended first. The response is closed."""
    try:
        async with contextlib.aclosing(response.aiter_bytes()) as pieces:
            events = SseEvents()
            async for piece in pieces:
                for name, data in events.feed(piece):
                    if await dispatch(name, data):
                        await drain_briefly(pieces)
                        return True
            for name, data in events.end():
                if await dispatch(name, data):
                    return True
            return False
    finally:
        await response.aclose()
