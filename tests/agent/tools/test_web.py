"""http_request and web_fetch against a real local server: output shape, caps,
HTML conversion, and the address policy applied through the registry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agent.messages import ToolCall
from agent.tools.base import ToolContext, ToolError, ToolRegistry
from agent.tools.web import (
    HttpRequestArgs,
    HttpRequestTool,
    WebFetchArgs,
    WebFetchTool,
    html_to_markdown,
)

MakeCtx = Callable[..., ToolContext]

PAGE = """<!doctype html>
<html><head><title> Test   Page </title><style>body { color: red }</style>
<script>var secret = "do-not-show";</script></head>
<body>
<nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<h1>Main  heading</h1>
<p>First paragraph with a <a href="/docs/intro">relative link</a> and
   <a href="https://example.org/abs">an absolute one</a>.</p>
<script>alert("nope")</script>
<h2>List</h2>
<ul><li>one</li><li>two <code>x = 1</code></li></ul>
<pre>  indented
    code</pre>
<p>Entities: &amp; &lt;tag&gt;<br>next line</p>
<a href="javascript:void(0)">click</a>
</body></html>"""


def _app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def echo(request: web.Request) -> web.Response:
        body = await request.text()
        return web.Response(
            text=f"{request.method} {request.headers.get('X-Test')} {body}",
            headers={"ETag": '"v1"', "X-Internal": "hidden"},
        )

    async def big(request: web.Request) -> web.Response:
        return web.Response(text="y" * 5000)

    async def binary(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\x00\x01" * 10, content_type="image/png")

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="gone")

    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/page"})

    async def text(request: web.Request) -> web.Response:
        return web.Response(text="plain " * 100)

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/big", big)
    app.router.add_get("/binary", binary)
    app.router.add_get("/missing", missing)
    app.router.add_get("/moved", moved)
    app.router.add_get("/text", text)
    return app


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    srv = TestServer(_app(), host="127.0.0.1")
    async with srv:
        yield srv


@pytest.fixture
def open_ctx(make_ctx: MakeCtx) -> ToolContext:
    return make_ctx(http_allow_private=True)


def test_html_to_markdown_conversion() -> None:
    title, text = html_to_markdown(PAGE, "http://site.test/dir/page")
    assert title == "Test Page"
    assert text == (
        "# Main heading\n\n"
        "First paragraph with a [relative link](http://site.test/docs/intro) and "
        "[an absolute one](https://example.org/abs).\n\n"
        "## List\n\n"
        "- one\n"
        "- two `x = 1`\n\n"
        "```\n  indented\n    code\n```\n\n"
        "Entities: & <tag>\n"
        "next line\n\n"
        "click"
    )


def test_html_to_markdown_handles_broken_markup() -> None:
    title, text = html_to_markdown("<p>open <b>bold<p>second</div></nav></script><a>x", "")
    assert title == ""
    assert text == "open bold\n\nsecond\n\nx"


async def test_http_request_get(server: TestServer, open_ctx: ToolContext) -> None:
    out = await HttpRequestTool().run(HttpRequestArgs(url=str(server.make_url("/echo"))), open_ctx)
    head, body = out.split("\n\n", 1)
    assert head.splitlines()[0] == "status: 200 OK"
    assert "content-type: text/plain; charset=utf-8" in head
    assert 'etag: "v1"' in head
    assert "x-internal" not in head
    assert body == "GET None "


async def test_http_request_post_with_headers_and_body(
    server: TestServer, open_ctx: ToolContext
) -> None:
    args = HttpRequestArgs(
        method="POST", url=str(server.make_url("/echo")), headers={"X-Test": "yes"}, body="data"
    )
    out = await HttpRequestTool().run(args, open_ctx)
    assert out.endswith("\n\nPOST yes data")


async def test_http_request_reports_redirect_target(
    server: TestServer, open_ctx: ToolContext
) -> None:
    out = await HttpRequestTool().run(HttpRequestArgs(url=str(server.make_url("/moved"))), open_ctx)
    assert f"final_url: {server.make_url('/page')}" in out


async def test_http_request_body_cap(server: TestServer, make_ctx: MakeCtx) -> None:
    ctx = make_ctx(http_allow_private=True, http_max_bytes=100)
    out = await HttpRequestTool().run(HttpRequestArgs(url=str(server.make_url("/big"))), ctx)
    body = out.split("\n\n", 1)[1]
    assert body == "y" * 100 + "\n[truncated: the response body exceeded 100 bytes]"


async def test_http_request_binary_body_is_summarised(
    server: TestServer, open_ctx: ToolContext
) -> None:
    out = await HttpRequestTool().run(
        HttpRequestArgs(url=str(server.make_url("/binary"))), open_ctx
    )
    assert out.endswith("\n\n[binary body: 60 bytes of image/png]")


async def test_http_request_non_2xx_is_reported_not_raised(
    server: TestServer, open_ctx: ToolContext
) -> None:
    out = await HttpRequestTool().run(
        HttpRequestArgs(url=str(server.make_url("/missing"))), open_ctx
    )
    assert out.startswith("status: 404 Not Found")
    assert out.endswith("\n\ngone")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/echo",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:{port}/echo",
        "http://localhost:{port}/echo",
    ],
)
@pytest.mark.parametrize("tool", ["http_request", "web_fetch"])
async def test_private_addresses_refused_by_default(
    server: TestServer, ctx: ToolContext, url: str, tool: str
) -> None:
    registry = ToolRegistry([HttpRequestTool(), WebFetchTool()])
    target = url.format(port=server.port)
    result = await registry.execute(ToolCall("1", tool, f'{{"url": "{target}"}}'), ctx)
    assert not result.ok
    assert result.content.startswith("Error: refusing to connect to ")
    assert "address (private network access is disabled)" in result.content


async def test_web_fetch_converts_html(server: TestServer, open_ctx: ToolContext) -> None:
    out = await WebFetchTool().run(WebFetchArgs(url=str(server.make_url("/page"))), open_ctx)
    assert out.startswith(f"url: {server.make_url('/page')}\ntitle: Test Page\n\n# Main heading")
    assert f"[relative link]({server.make_url('/docs/intro')})" in out
    assert "do-not-show" not in out
    assert "alert" not in out
    assert "Home" not in out  # nav dropped


async def test_web_fetch_follows_redirects(server: TestServer, open_ctx: ToolContext) -> None:
    out = await WebFetchTool().run(WebFetchArgs(url=str(server.make_url("/moved"))), open_ctx)
    assert out.startswith(f"url: {server.make_url('/page')}\ntitle: Test Page")


async def test_web_fetch_plain_text_and_max_chars(
    server: TestServer, open_ctx: ToolContext
) -> None:
    out = await WebFetchTool().run(
        WebFetchArgs(url=str(server.make_url("/text")), max_chars=120), open_ctx
    )
    assert out == (
        f"url: {server.make_url('/text')}\n\n" + ("plain " * 20) + "\n[truncated to 120 characters]"
    )


async def test_web_fetch_byte_cap_note(server: TestServer, make_ctx: MakeCtx) -> None:
    ctx = make_ctx(http_allow_private=True, http_max_bytes=50)
    out = await WebFetchTool().run(WebFetchArgs(url=str(server.make_url("/big"))), ctx)
    assert out.endswith("y" * 50 + "\n[truncated: the response body exceeded 50 bytes]")


async def test_web_fetch_refuses_errors_and_binary(
    server: TestServer, open_ctx: ToolContext
) -> None:
    tool = WebFetchTool()
    with pytest.raises(ToolError, match="failed with HTTP 404"):
        await tool.run(WebFetchArgs(url=str(server.make_url("/missing"))), open_ctx)
    with pytest.raises(ToolError, match=r"is not a text page \(image/png\)"):
        await tool.run(WebFetchArgs(url=str(server.make_url("/binary"))), open_ctx)


async def test_web_fetch_rejects_other_schemes(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="scheme 'file' is not allowed"):
        await WebFetchTool().run(WebFetchArgs(url="file:///etc/passwd"), ctx)


async def test_web_fetch_stops_reading_a_page_that_streams_past_the_cap(
    make_ctx: MakeCtx,
) -> None:
    """A page that streams 50 MB (chunked, no length): the fetch stops at the
    100 KB cap, so the server got to write a few socket buffers, not 50 MB."""
    sent = 0
    ended = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            while sent < 50_000_000:
                await response.write(b"y" * 65536)
                sent += 65536
        except ConnectionError:
            pass  # the client hung up
        finally:
            ended.set()
        return response

    app = web.Application()
    app.router.add_get("/endless", endless)
    async with TestServer(app, host="127.0.0.1") as srv:
        ctx = make_ctx(http_allow_private=True, http_max_bytes=100_000)
        args = WebFetchArgs(url=str(srv.make_url("/endless")), max_chars=200_000)
        out = await WebFetchTool().run(args, ctx)
        await asyncio.wait_for(ended.wait(), 10)
    page = out.split("\n\n", 1)[1]
    assert page == "y" * 100_000 + "\n[truncated: the response body exceeded 100000 bytes]"
    assert sent < 10_000_000, sent
