"""A fake Telegram Bot API server (aiohttp, 127.0.0.1 port 0) for tests.

Speaks the real wire protocol python-telegram-bot uses: every method is a POST to
`/bot<token>/<method>` with an empty, form-encoded or multipart body (non-string
values JSON-encoded), answers `{"ok": true, "result": ...}` or
`{"ok": false, "error_code", "description", "parameters"}`; files are fetched
with GET `/file/bot<token>/<file_path>`. A file added with `add_streamed_file`
lies: getFile declares a small size and the download streams far more, counting
what it got to send before the client hung up.

getUpdates keeps the real offset semantics: an update stays pending until a
getUpdates call with a higher offset confirms it, and an empty call is held for
up to `timeout` seconds until an update arrives. Errors can be injected per
method (`fail_next`), and an outage (`start_outage` … `end_outage`) answers
every call of a method as Telegram's front end does when the Bot API is down:
HTTP 502 with an HTML page. Everything the bot did is recorded in `calls`
(`error_code` set on the calls that were refused), with the client's address
(`peer`: one per connection) and, when built with `identify_clients=True`, the
pid of the process on this host that holds that connection (Linux /proc).

Every getUpdates call is also a `Poll` in `polls`: from which connection and
process, from its arrival until it was answered or its client hung up (a
poller killed mid-poll ends its poll then, as Telegram's does: seen within
0.1 s, and always before the next poll is counted), and `max_concurrent_polls`
is the most that were ever in flight at once: more than one means two pollers
ran together, which Telegram would refuse (409).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http import HTTPStatus
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.streamed import StreamedBody, stream_body

__all__ = [
    "BOT_ID",
    "BOT_USERNAME",
    "TOKEN",
    "Call",
    "FakeTelegram",
    "Poll",
    "StreamedFile",
    "check_html",
    "connection_owner",
    "picture_size",
]

TOKEN = "123456:TEST-token_secret"
BOT_ID = 123456
BOT_USERNAME = "picotest_bot"
PHOTO_MAX = 10 * 1024 * 1024  # sendPhoto
UPLOAD_MAX = (
    50 * 1024 * 1024
)  # any multipart upload (https://core.telegram.org/bots/api#sending-files)
_HTML_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "pre", "a"}
_HTML_TAGS |= {"tg-spoiler", "span", "blockquote", "tg-emoji"}
_HANGUP_CHECK_SECS = 0.1  # how often a held getUpdates looks whether its client hung up


@dataclass
class StreamedFile(StreamedBody):
    """A file whose getFile says `declared` bytes but whose download streams
    `total` (chunked, no Content-Length)."""

    declared: int = 0


@dataclass
class Call:
    method: str
    params: dict[str, str]
    content_type: str
    uploads: dict[str, bytes] = field(default_factory=dict)  # multipart file parts
    at: float = field(default_factory=time.monotonic)
    error_code: int | None = None  # the HTTP status of an injected failure
    peer: tuple[str, int] | None = None  # the client's address: a new one, a new connection
    pid: int | None = None  # the process holding that connection (`identify_clients`)
    # whether the client has hung up (its connection is closed)
    hung_up: Callable[[], bool] = field(default=lambda: False, repr=False, compare=False)

    def json(self, key: str) -> Any:
        return json.loads(self.params[key])


@dataclass
class Poll:
    """One getUpdates call as the fake served it: which connection, which process, when."""

    call: Call
    ended: float | None = None  # answered, or its client hung up (time.monotonic)
    returned: list[int] = field(default_factory=list)  # the update_ids it answered with

    @property
    def started(self) -> float:
        return self.call.at

    @property
    def peer(self) -> tuple[str, int] | None:
        return self.call.peer

    @property
    def pid(self) -> int | None:
        return self.call.pid


@dataclass
class _Failure:
    status: int
    description: str
    parameters: dict[str, Any] | None
    when: Callable[[Call], bool] | None


class _EntityChecker(HTMLParser):
    """Telegram-like HTML validation: known tags, proper nesting; returns visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.error: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HTML_TAGS:
            self.error = self.error or f'unsupported start tag "{tag}"'
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.error = self.error or f'can\'t find end tag corresponding to start tag "{tag}"'
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check_html(text: str) -> tuple[str, str | None]:
    """The visible text of Telegram HTML, and why Telegram would refuse it (or None)."""
    checker = _EntityChecker()
    checker.feed(text)
    checker.close()
    error = checker.error
    if error is None and checker.stack:
        error = f'can\'t find end tag corresponding to start tag "{checker.stack[-1]}"'
    return "".join(checker.text), error


class FakeTelegram:
    """`async with FakeTelegram() as tg:` → `tg.api_base` to put in the config."""

    def __init__(self, token: str = TOKEN, *, identify_clients: bool = False) -> None:
        self.token = token
        self.api_base = ""
        self.identify_clients = identify_clients  # look up each call's process (`Call.pid`)
        self.calls: list[Call] = []
        self.polls: list[Poll] = []  # every getUpdates call, in order of arrival
        self.max_concurrent_polls = 0  # the most getUpdates calls ever in flight at once
        self.pending: list[dict[str, Any]] = []  # delivered-or-not, not yet confirmed
        self.confirmed: list[int] = []
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, content)
        self.webhook: dict[str, str] = {}
        self.downloads: list[str] = []
        self.streamed: dict[str, StreamedFile] = {}  # file_path -> a file that lies
        self.forums: dict[int, set[int]] = {}  # forum supergroup id -> its topic thread ids
        self._next_update_id = 1000
        self._next_callback = 0
        self._next_message_id: dict[int, int] = {}
        self._failures: dict[str, list[_Failure]] = {}
        # method -> (which calls, set when one is held, released by the test)
        self._holds: dict[str, tuple[Callable[[Call], bool], asyncio.Event, asyncio.Event]] = {}
        self._outages: dict[str, int] = {}  # method -> HTTP status while it is down
        self._changed = asyncio.Condition()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=UPLOAD_MAX + (1 << 20))  # 413 past it, as Telegram
        app.router.add_post("/bot{token}/{method}", self._method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = port = self._runner.addresses[0][1]
        self.api_base = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self._closing = True
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- test controls -----------------------------------------------------------------------

    async def add_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue a raw update (its update_id is assigned here) and wake long polls."""
        update = {"update_id": self._next_update_id, **update}
        self._next_update_id += 1
        async with self._changed:
            self.pending.append(update)
            self._changed.notify_all()
        return update

    def message(
        self,
        text: str | None = "hello",
        *,
        chat_id: int = 42,
        user_id: int = 42,
        username: str | None = "alice",
        chat_type: str = "private",
        message_id: int | None = None,
        language_code: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Build a Message object as Telegram sends it."""
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = "Alice"
        else:
            chat["title"] = "Test group"
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": "Alice"}
        if username:
            sender["username"] = username
        if language_code:
            sender["language_code"] = language_code
        msg: dict[str, Any] = {
            "message_id": message_id if message_id is not None else self._message_id(chat_id),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
        }
        if text is not None:
            msg["text"] = text
        msg.update(extra)
        return msg

    async def add_message(self, text: str | None = "hello", **kwargs: Any) -> dict[str, Any]:
        return await self.add_update({"message": self.message(text, **kwargs)})

    def topic_message(
        self, text: str, *, chat_id: int, thread_id: int, **kwargs: Any
    ) -> dict[str, Any]:
        """A message in forum topic `thread_id` of supergroup `chat_id` (made a forum)."""
        self.forums.setdefault(chat_id, set()).add(thread_id)
        msg = self.message(text, chat_id=chat_id, chat_type="supergroup", **kwargs)
        msg["chat"]["is_forum"] = True
        msg.update(message_thread_id=thread_id, is_topic_message=True)
        return msg

    def _thread_error(self, call: Call) -> web.Response | None:
        """What Telegram answers a send or chat action naming a thread the chat lacks."""
        raw = call.params.get("message_thread_id")
        if raw is None:
            return None
        topics = self.forums.get(int(call.params["chat_id"]))
        if topics is None or int(raw) not in topics:
            return _error(400, "Bad Request: message thread not found")
        return None

    async def press(
        self, sent: Call, data: str, *, user_id: int = 42, username: str | None = "alice"
    ) -> dict[str, Any]:
        """A user presses the inline button `data` under the bot's message `sent`
        (a sendMessage call): the `callback_query` update Telegram delivers."""
        chat_id = int(sent.params["chat_id"])
        chat: dict[str, Any] = {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": "Alice"}
        if username:
            user["username"] = username
        self._next_callback += 1
        query = {
            "id": str(4_000_000 + self._next_callback),
            "from": user,
            "message": {
                "message_id": int(sent.params["_message_id"]),
                "date": int(time.time()),
                "chat": chat,
                "from": {"id": BOT_ID, "is_bot": True, "first_name": "Pico"},
                "text": sent.params["_visible"],
                "reply_markup": json.loads(sent.params["reply_markup"]),
            },
            "chat_instance": "-7000",
            "data": data,
        }
        return await self.add_update({"callback_query": query})

    def add_file(self, content: bytes, file_path: str = "photos/file_0.jpg") -> str:
        file_id = f"FILE{len(self.files)}"
        self.files[file_id] = (file_path, content)
        return file_id

    def add_streamed_file(
        self,
        declared: int,
        total: int,
        file_path: str = "documents/liar.bin",
        *,
        pause_secs: float = 0.0,
    ) -> tuple[str, StreamedFile]:
        file_id = self.add_file(b"", file_path)
        streamed = StreamedFile(total, pause_secs=pause_secs, declared=declared)
        self.streamed[file_path] = streamed
        return file_id, streamed

    def fail_next(
        self,
        method: str,
        status: int,
        description: str,
        *,
        parameters: dict[str, Any] | None = None,
        times: int = 1,
        when: Callable[[Call], bool] | None = None,
    ) -> None:
        """Answer the next `times` calls of `method` (matching `when`) with this error."""
        failure = _Failure(status, description, parameters, when)
        self._failures.setdefault(method, []).extend([failure] * times)

    def hold(
        self, method: str, when: Callable[[Call], bool]
    ) -> tuple[asyncio.Event, asyncio.Event]:
        """Calls of `method` matching `when` wait before being answered: the
        first event is set when one waits, setting the second lets them go."""
        held, release = asyncio.Event(), asyncio.Event()
        self._holds[method] = (when, held, release)
        return held, release

    def start_outage(self, method: str = "sendMessage", status: int = 502) -> None:
        """Every call of `method` fails with `status` (an HTML error page, not
        the Bot API's JSON) until `end_outage`."""
        self._outages[method] = status

    def end_outage(self, method: str = "sendMessage") -> None:
        self._outages.pop(method, None)

    def refused(self, method: str) -> list[Call]:
        """Calls of `method` answered with an injected failure or an outage."""
        return [c for c in self.calls_of(method) if c.error_code is not None]

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """A `channels.telegram` config section pointing at this fake."""
        section: dict[str, Any] = {
            "enabled": True,
            "token": self.token,
            "api_base": self.api_base,
            "poll_timeout_secs": 5,
            "allow_from": ["*"],
        }
        section.update(overrides)
        return section

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    @property
    def polls_in_flight(self) -> int:
        """getUpdates calls arrived and neither answered nor hung up yet."""
        return sum(1 for poll in self.polls if poll.ended is None)

    @property
    def sent_texts(self) -> list[str]:
        return [c.params["text"] for c in self.calls_of("sendMessage") if c.params.get("_ok")]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_for_calls(self, method: str, count: int, timeout: float = 5.0) -> list[Call]:
        await self.wait_for(lambda: len(self.calls_of(method)) >= count, timeout)
        return self.calls_of(method)

    # -- HTTP handlers ------------------------------------------------------------------------

    def _message_id(self, chat_id: int) -> int:
        self._next_message_id[chat_id] = self._next_message_id.get(chat_id, 0) + 1
        return self._next_message_id[chat_id]

    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    async def _method(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        form = await request.post()  # urlencoded, multipart or empty
        params: dict[str, str] = {}
        uploads: dict[str, bytes] = {}
        for key, value in form.items():
            if isinstance(value, str):
                params[key] = value
            else:
                params[key] = f"attach://{value.filename}"
                uploads[key] = value.file.read()
        call = Call(method, params, request.content_type, uploads)
        call.peer, call.hung_up = _peer(request), lambda: request.transport is None
        if self.identify_clients and call.peer is not None:
            # now, while the connection is there to be found
            call.pid = await asyncio.to_thread(connection_owner, call.peer[1], self._port)
        if method != "getUpdates":
            return await self._answer(call)
        poll = Poll(call)
        async with self._changed:
            for held in self.polls:  # their clients may have hung up since they last looked
                if held.ended is None and held.call.hung_up():
                    held.ended = time.monotonic()
            self.polls.append(poll)
            self.max_concurrent_polls = max(self.max_concurrent_polls, self.polls_in_flight)
        try:
            return await self._answer(call, poll)
        finally:
            async with self._changed:
                poll.ended = poll.ended or time.monotonic()
                self._changed.notify_all()

    async def _answer(self, call: Call, poll: Poll | None = None) -> web.Response:
        method = call.method
        if method in self._outages:
            call.error_code = status = self._outages[method]
            await self._record(call)
            page = f"<html><body><h1>{status} {HTTPStatus(status).phrase}</h1></body></html>"
            return web.Response(status=status, text=page, content_type="text/html")
        gate = self._holds.get(method)
        if gate is not None and gate[0](call):
            gate[1].set()  # a call is held: the test may act while it waits
            await gate[2].wait()
        failure = self._take_failure(call)
        if failure is not None:
            call.error_code = failure.status
            await self._record(call)
            return _error(failure.status, failure.description, failure.parameters)
        if poll is not None:
            return await self._m_getUpdates(call, poll)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            await self._record(call)
            return _error(404, "Not Found: method not found")
        response: web.Response = await handler(call)
        return response

    def _take_failure(self, call: Call) -> _Failure | None:
        queue = self._failures.get(call.method, [])
        for i, failure in enumerate(queue):
            if failure.when is None or failure.when(call):
                return queue.pop(i)
        return None

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        if path in self.streamed:
            self.downloads.append(path)
            return await stream_body(request, self.streamed[path])
        for file_path, content in self.files.values():
            if file_path == path:
                self.downloads.append(path)
                return web.Response(body=content, content_type="application/octet-stream")
        return web.Response(status=404)

    async def _m_getMe(self, call: Call) -> web.Response:
        await self._record(call)
        return _ok(
            {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Pico",
                "username": BOT_USERNAME,
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        )

    async def _m_deleteWebhook(self, call: Call) -> web.Response:
        await self._record(call)
        self.webhook = {}
        return _ok(True)

    async def _m_setWebhook(self, call: Call) -> web.Response:
        await self._record(call)
        self.webhook = dict(call.params)
        return _ok(True)

    async def _m_getUpdates(self, call: Call, poll: Poll) -> web.Response:
        await self._record(call)
        if self.webhook:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(call.params.get("offset") or 0)
        limit = int(call.params.get("limit") or 100)
        timeout = float(call.params.get("timeout") or 0)
        async with self._changed:
            if offset > 0:
                done = [u for u in self.pending if u["update_id"] < offset]
                self.confirmed.extend(u["update_id"] for u in done)
                self.pending = [u for u in self.pending if u["update_id"] >= offset]
                if done:
                    self._changed.notify_all()
            if not self.pending and timeout > 0 and not self._closing:
                await self._hold_poll(call, timeout)
            batch = self.pending[:limit]
            poll.returned = [u["update_id"] for u in batch]
        return _ok(batch)

    async def _hold_poll(self, call: Call, timeout: float) -> None:
        """Until an update arrives, the fake closes, the client hangs up (looked
        at every `_HANGUP_CHECK_SECS`: aiohttp tells a handler no sooner) or
        `timeout` passed; called holding `_changed`."""
        deadline = time.monotonic() + timeout
        while not (self.pending or self._closing or call.hung_up()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, _HANGUP_CHECK_SECS)):
                    await self._changed.wait()

    async def _m_sendMessage(self, call: Call) -> web.Response:
        chat_id = int(call.params["chat_id"])
        text = call.params.get("text", "")
        if (refused := self._thread_error(call)) is not None:
            await self._record(call)
            return refused
        if call.params.get("parse_mode") == "HTML":
            visible, error = check_html(text)
            if error is not None:
                await self._record(call)
                return _error(400, f"Bad Request: can't parse entities: {error}")
            text = visible
        if not text.strip():
            await self._record(call)
            return _error(400, "Bad Request: message text is empty")
        if len(text) > 4096:
            await self._record(call)
            return _error(400, "Bad Request: message is too long")
        if "reply_markup" in call.params and not _valid_inline_keyboard(
            call.params["reply_markup"]
        ):
            await self._record(call)
            return _error(400, "Bad Request: can't parse reply keyboard markup JSON object")
        message = {
            "message_id": self._message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Pico", "username": BOT_USERNAME},
            "text": text,
        }
        call.params["_ok"] = "1"
        call.params["_visible"] = text
        call.params["_message_id"] = str(message["message_id"])
        await self._record(call)
        return _ok(message)

    async def _m_answerCallbackQuery(self, call: Call) -> web.Response:
        await self._record(call)
        if not call.params.get("callback_query_id"):
            return _error(400, "Bad Request: query is too old and response timeout expired")
        return _ok(True)

    async def _m_editMessageText(self, call: Call) -> web.Response:
        text = call.params.get("text", "")
        if call.params.get("parse_mode") == "HTML":
            visible, error = check_html(text)
            if error is not None:
                await self._record(call)
                return _error(400, f"Bad Request: can't parse entities: {error}")
            text = visible
        chat_id = int(call.params["chat_id"])
        call.params["_ok"] = "1"
        call.params["_visible"] = text
        await self._record(call)
        return _ok(
            {
                "message_id": int(call.params["message_id"]),
                "date": int(time.time()),
                "edit_date": int(time.time()),
                "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
                "text": text,
            }
        )

    async def _m_sendChatAction(self, call: Call) -> web.Response:
        await self._record(call)
        if (refused := self._thread_error(call)) is not None:
            return refused
        call.params["_ok"] = "1"
        return _ok(True)

    async def _m_sendDocument(self, call: Call) -> web.Response:
        return await self._upload(call, "document")

    async def _m_sendPhoto(self, call: Call) -> web.Response:
        return await self._upload(call, "photo")

    async def _upload(self, call: Call, field_name: str) -> web.Response:
        """sendDocument / sendPhoto: a multipart upload, a thread checked like a text's."""
        chat_id = int(call.params["chat_id"])
        if (refused := self._thread_error(call)) is not None:
            await self._record(call)
            return refused
        if field_name not in call.uploads:
            await self._record(call)
            return _error(400, f"Bad Request: there is no {field_name} in the request")
        if len(call.params.get("caption", "")) > 1024:
            await self._record(call)
            return _error(400, "Bad Request: message caption is too long")
        content = call.uploads[field_name]
        if len(content) > UPLOAD_MAX:
            await self._record(call)
            return _error(413, "Request Entity Too Large")
        dims = picture_size(content) if field_name == "photo" else None
        if field_name == "photo" and (refusal := _photo_refusal(len(content), dims)):
            call.error_code = 400
            await self._record(call)
            return _error(400, f"Bad Request: {refusal}")
        file_id = self.add_file(content, f"{field_name}s/upload_{len(self.files)}")
        call.params["_ok"] = "1"
        await self._record(call)
        described = {
            "file_id": file_id,
            "file_unique_id": f"U{file_id}",
            "file_size": len(content),
        }
        message: dict[str, Any] = {
            "message_id": self._message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
        }
        if field_name == "photo":
            width, height = dims or (1, 1)
            message["photo"] = [{**described, "width": width, "height": height}]
        else:
            described["file_name"] = call.params[field_name].removeprefix("attach://")
            message["document"] = described
        if "caption" in call.params:
            message["caption"] = call.params["caption"]
        return _ok(message)

    async def _m_getFile(self, call: Call) -> web.Response:
        await self._record(call)
        file_id = call.params.get("file_id", "")
        if file_id not in self.files:
            return _error(400, "Bad Request: invalid file_id")
        file_path, content = self.files[file_id]
        streamed = self.streamed.get(file_path)
        return _ok(
            {
                "file_id": file_id,
                "file_unique_id": f"U{file_id}",
                "file_size": streamed.declared if streamed else len(content),
                "file_path": file_path,
            }
        )


def _peer(request: web.Request) -> tuple[str, int] | None:
    transport = request.transport
    address = transport.get_extra_info("peername") if transport is not None else None
    return (str(address[0]), int(address[1])) if isinstance(address, tuple) else None


def connection_owner(client_port: int, server_port: int) -> int | None:
    """The pid of the process on this host holding the client end of the TCP
    connection from `client_port` to `server_port` (Linux: the socket's inode in
    /proc/net/tcp, then whose fd points at it), or None if none can be found."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            columns = row.split()
            local, remote = columns[1], columns[2]
            if int(local.rsplit(":", 1)[1], 16) == client_port and (
                int(remote.rsplit(":", 1)[1], 16) == server_port
            ):
                inode = columns[9]
    if inode is None or inode == "0":  # not found, or closing (no process holds it)
        return None
    target = f"socket:[{inode}]"
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (process / "fd").iterdir()):
                return int(process.name)
        except OSError:  # gone, or not ours to look at
            continue
    return None


def _photo_refusal(size: int, dims: tuple[int, int] | None) -> str | None:
    """sendPhoto's checks (https://core.telegram.org/bots/api#sendphoto): at most
    10 MB, width + height at most 10000, ratio at most 20. An image whose size
    cannot be read here is taken (the real API would try to decode it)."""
    if size > PHOTO_MAX:
        return "PHOTO_SAVE_FILE_INVALID"  # what the Bot API answers an oversize photo
    if dims is None:
        return None
    width, height = dims
    if width + height > 10_000 or max(width, height) > 20 * min(width, height):
        return "PHOTO_INVALID_DIMENSIONS"
    return None


def picture_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of an intact PNG (IHDR with a good CRC) or a baseline /
    progressive JPEG; written apart from the channel's reader on purpose."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        if zlib.crc32(data[12:29]) != int.from_bytes(data[29:33], "big"):
            return None
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(
                data[at + 5 : at + 7], "big"
            )
        at += 2 + length
    return None


def _valid_inline_keyboard(raw: str) -> bool:
    """An InlineKeyboardMarkup as Telegram checks it: rows of buttons, each with
    a text and callback_data of 1-64 bytes (the only kind we send)."""
    try:
        markup = json.loads(raw)
    except ValueError:
        return False
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not rows:
        return False
    for row in rows:
        if not isinstance(row, list) or not row:
            return False
        for button in row:
            data = button.get("callback_data") if isinstance(button, dict) else None
            if not isinstance(button.get("text"), str) or not isinstance(data, str):
                return False
            if not 1 <= len(data.encode()) <= 64:
                return False
    return True


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)
