"""Three workers on one PostgreSQL behind nginx, one of them SIGKILLed every
few seconds (issue 54): 200 chats × 5 messages, half through Feishu's webhook
and half through WebSocket clients, all through nginx; every message is
answered exactly once and in its chat's order, as the platform and the
clients saw it and as the database holds it.

Each chat keeps two messages in flight: it sends message n once message n-1
was recorded (the webhook's 200, the WebSocket `ack`) and the reply to n-2
came, so a chat's turns queue on whichever worker holds it (queue mode
`followup`: one turn, one reply per message). The kills rotate over the
workers as the answers come in; every other killed worker is started again at
once (it takes its own leases back), the others only once the rest took its
work over (its leases expired). A WebSocket client reconnects through
nginx when its connection dies and sends its unacknowledged message again with
the same id; the Feishu fake's sender redelivers an event until it gets 200,
as Feishu does. Replies are told apart by their outbox id (WebSocket) and by
Feishu's idempotency `uuid` (the fake shows a resent uuid once), as each
protocol allows a reply to be sent twice across a crash.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from channels.feishu.webhook import WEBHOOK_PATH
from tests.cluster import Cluster, dump_tables, query, report, running_cluster
from tests.fakes.feishu_server import (
    ENCRYPT_KEY,
    VERIFICATION_TOKEN,
    EventSender,
    FakeFeishu,
    config_dict,
    message_event,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.support import conversation, process_config, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(300)]

CHATS = 200  # half Feishu, half WebSocket
PER_CHAT = 5
TOTAL = CHATS * PER_CHAT
WINDOW = 2  # messages of a chat in flight at once
LEASE_SECS = 3
# a kill each time this share of all messages has been answered: rotating
# over the three workers, each landing amid the load
KILL_AT = (0.08, 0.22, 0.36, 0.50, 0.64, 0.78)
RETRY_SECS = 0.1  # a client's back-off before it reconnects or redelivers


def text_of(chat_id: str, n: int) -> str:
    return f"{chat_id} says {n}"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:80]}"


class _Again(Exception):
    """The gateway asked for the message (or hello) again: a new connection."""


@dataclass
class WsChat:
    """A WebSocket user: sends m0…m4 (each after the previous one's ack and the
    reply two back), over connections through nginx that die with their worker."""

    chat_id: str
    url: str
    replies: dict[str, dict[int, str]] = field(default_factory=dict)  # reply_to -> {id: text}
    arrival: list[str] = field(default_factory=list)  # reply_to of each new outbox id
    acked: int = 0  # m0 … m(acked-1) are recorded
    duplicates: int = 0  # acks saying "duplicate": a resent message was recorded before
    again: int = 0  # replies delivered again (an outbox id seen before)
    reconnects: int = 0
    why: Counter[str] = field(default_factory=Counter)  # what ended each connection
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def answered(self) -> int:
        return len(self.replies)

    def _may_send(self, n: int) -> bool:
        return n < PER_CHAT and (n < WINDOW or f"m{n - WINDOW}" in self.replies)

    async def run(self) -> None:
        """Until cancelled: the test ends it once every chat is answered."""
        while True:
            try:
                await self._connection()
            except (OSError, TimeoutError, websockets.WebSocketException, _Again) as exc:
                self.reconnects += 1
                self.why[_reason(exc)] += 1
            await asyncio.sleep(RETRY_SECS)

    async def _connection(self) -> None:
        async with websockets.connect(self.url, open_timeout=5) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": self.chat_id}))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if welcome["type"] != "welcome":  # e.g. `internal` at hello: try again
                self.errors.append(welcome)
                raise _Again
            sent = -1  # the message sent on this connection and not acked yet
            while True:
                if sent < self.acked and self._may_send(self.acked):
                    sent = self.acked
                    frame = {
                        "type": "message",
                        "id": f"m{sent}",
                        "text": text_of(self.chat_id, sent),
                    }
                    await ws.send(json.dumps(frame))
                self._take(json.loads(await ws.recv()))

    def _take(self, frame: dict[str, Any]) -> None:
        if frame["type"] == "ack":
            assert frame["id"] == f"m{self.acked}", (self.chat_id, frame)
            assert frame["status"] in ("accepted", "duplicate"), (self.chat_id, frame)
            self.duplicates += frame["status"] == "duplicate"
            self.acked += 1
        elif frame["type"] == "message":
            answers = self.replies.setdefault(frame["reply_to"], {})
            if frame["id"] in answers:
                self.again += 1
            else:
                self.arrival.append(frame["reply_to"])
            answers[frame["id"]] = frame["text"]
        elif frame["type"] == "error":  # the message was not recorded: sent again
            self.errors.append(frame)
            raise _Again


class SentIndex:
    """The Feishu fake's shown messages by target (the message replied to),
    read incrementally: a chat's check costs nothing however many were sent."""

    def __init__(self, fs: FakeFeishu) -> None:
        self.fs = fs
        self.targets: set[str] = set()
        self._read = 0

    def __contains__(self, target: str) -> bool:
        self._catch_up()
        return target in self.targets

    def __len__(self) -> int:
        self._catch_up()
        return len(self.targets)

    def _catch_up(self) -> None:
        sent = self.fs.sent
        self.targets.update(s.target for s in sent[self._read :])
        self._read = len(sent)


@dataclass
class FeishuChat:
    """A Feishu chat: each event POSTed through nginx to the webhook until it
    is answered 200 (redelivered unchanged, as Feishu does)."""

    chat_id: str
    sender: EventSender
    shown: SentIndex
    redeliveries: int = 0
    why: Counter[str] = field(default_factory=Counter)  # what each failed delivery got
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.events = [
            message_event(
                text_of(self.chat_id, n),
                chat_id=self.chat_id,
                sender=f"ou_{self.chat_id}",
                message_id=self.message_id(n),
            )
            for n in range(PER_CHAT)
        ]

    def message_id(self, n: int) -> str:
        return f"om_{self.chat_id}_{n}"

    def replied(self, n: int) -> bool:
        return self.message_id(n) in self.shown

    async def run(self) -> None:
        for n in range(PER_CHAT):
            if n >= WINDOW:
                replied = functools.partial(self.replied, n - WINDOW)
                await self.shown.fs.wait_until(replied, timeout=240)
            while not await self._deliver(n):
                self.redeliveries += 1
                await asyncio.sleep(RETRY_SECS)

    async def _deliver(self, n: int) -> bool:
        try:
            status, _ = await self.sender.post(self.events[n])
        except (aiohttp.ClientError, OSError) as exc:
            self.why[_reason(exc)] += 1
            return False
        if status != 200:
            self.why[f"HTTP {status}"] += 1
        return status == 200


@dataclass
class Kill:
    worker: str
    answered: int  # messages answered when it was killed
    at: float  # seconds since the load started
    taken_over: int  # messages and channels the others took over before it was back
    back_after: float  # seconds from the kill until it was ready again


async def _stranded(url: str, owner: str) -> int:
    """Work the dead worker `owner` still holds: unfinished messages of chats
    it holds, and its channel leases (another worker takes those over at once
    once it is seen dead, whether or not a message waits)."""
    rows = await query(
        url,
        "SELECT COUNT(*) FROM inbox i JOIN leases l "
        "ON l.key = 'chat:' || i.channel || ':' || i.chat_id "
        "WHERE l.owner = %s AND i.state != 'done'",
        owner,
    )
    channels = await query(
        url, "SELECT COUNT(*) FROM leases WHERE owner = %s AND key LIKE 'channel:%%'", owner
    )
    return int(rows[0][0]) + int(channels[0][0])


def _worker_id(cluster: Cluster, index: int) -> str:
    ids = [line["worker"] for line in cluster[index].current.lines if line.get("worker")]
    assert ids, f"no log line of {cluster[index].name} names its worker id"
    return str(ids[0])


def _reached(answered: Callable[[], int], count: float) -> bool:
    return answered() >= count


async def _chaos(cluster: Cluster, answered: Callable[[], int], started: float) -> list[Kill]:
    """The kills: every other one restarts the worker at once (it takes its
    own leases back), the others once the rest took its work over (the dead
    worker's leases expired: its channels and its chats with messages waiting
    moved to the others)."""
    kills: list[Kill] = []
    url = cluster.storage_url
    for k, share in enumerate(KILL_AT):
        await wait_until(functools.partial(_reached, answered, share * TOTAL), timeout=180)
        index = k % len(cluster.workers)
        owner = _worker_id(cluster, index)
        at = time.monotonic()
        done = answered()
        await cluster.kill(index)
        stranded = await _stranded(url, owner) if k % 2 else 0
        if stranded:
            await wait_until(functools.partial(_none_left, url, owner), timeout=LEASE_SECS * 10)
        await cluster.restart(index)
        back = round(time.monotonic() - at, 2)
        kills.append(Kill(cluster[index].name, done, round(at - started, 2), stranded, back))
    return kills


async def _none_left(url: str, owner: str) -> bool:
    return await _stranded(url, owner) == 0


async def _latencies(url: str) -> list[float]:
    """Seconds from each message's inbox record to its reply's send, sorted."""
    rows = await query(
        url,
        "SELECT i.received_at, MAX(o.sent_at) FROM inbox i "
        "JOIN outbox o ON o.inbox_id = i.id WHERE o.sent_at IS NOT NULL GROUP BY i.id",
    )
    return sorted(
        (datetime.fromisoformat(str(sent)) - datetime.fromisoformat(str(got))).total_seconds()
        for got, sent in rows
    )


async def _database(url: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "inbox": await query(
            url,
            "SELECT i.state, COUNT(o.id), MIN(o.state), MAX(o.state) FROM inbox i "
            "LEFT JOIN outbox o ON o.inbox_id = i.id GROUP BY i.id",
        ),
        "outbox": await query(url, "SELECT state, COUNT(*) FROM outbox GROUP BY state"),
        "messages": await query(
            url,
            "SELECT s.chat_id, m.role, m.content FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role IN ('user', 'assistant') ORDER BY s.chat_id, m.seq",
        ),
    }


def _llm_log(llm: FakeOpenAI, asked: list[dict[str, Any]]) -> None:
    """Record each model call as it arrives (when, the user texts it carries):
    evidence for a failure. The reply stays the fake's default echo."""

    async def record(body: dict[str, Any]) -> None:
        users = [m["content"] for m in conversation(body) if m["role"] == "user"]
        asked.append({"at": time.time(), "users": users})

    llm.responder = record


async def _evidence(
    directory: Path, url: str, asked: list[dict[str, Any]], fs: FakeFeishu, ws: list[WsChat]
) -> None:
    """What a failure needs explaining, kept with the workers' logs."""
    await dump_tables(url, directory, "inbox", "outbox", "messages", "leases", "workers")
    sent = [{"kind": s.kind, "target": s.target, "text": s.text, "uuid": s.uuid} for s in fs.sent]
    chats = {c.chat_id: {"replies": c.replies, "arrival": c.arrival} for c in ws}
    for name, value in (("llm", asked), ("feishu_sent", sent), ("ws_chats", chats)):
        (directory / f"{name}.json").write_text(json.dumps(value, indent=1, default=str))


async def test_three_workers_behind_nginx_answer_1000_messages_once_in_order_amid_kills(
    tmp_path: Path, llm: FakeOpenAI, postgres_url: str
) -> None:
    # a model call takes seconds, as a real one does: every kill finds turns
    # waiting on it, and the load lasts long enough for the kills to land amid it
    llm.delay = 2.0
    asked: list[dict[str, Any]] = []
    _llm_log(llm, asked)
    async with FakeFeishu() as fs:
        feishu = config_dict(
            fs.base_url,
            mode="webhook",
            encrypt_key=ENCRYPT_KEY,
            verification_token=VERIFICATION_TOKEN,
        )
        config = process_config(
            llm.base_url,
            storage={"url": postgres_url},
            channels={"feishu": feishu},
            gateway={"queue_mode": "followup", "outbound_retry_base_secs": 0.05},
        )
        async with running_cluster(tmp_path / "cluster", config, lease_secs=LEASE_SECS) as cluster:
            sender = EventSender(cluster.nginx.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
            half = CHATS // 2
            ws_chats = [WsChat(f"ws-c{i:03d}", cluster.nginx.ws_url) for i in range(half)]
            shown = SentIndex(fs)
            fs_chats = [FeishuChat(f"oc_c{i:03d}", sender, shown) for i in range(half)]
            started = time.monotonic()
            clients = [asyncio.create_task(c.run()) for c in ws_chats]
            feeds = [asyncio.create_task(c.run()) for c in fs_chats]

            def answered() -> int:
                """Messages answered so far; a chat's failure ends the wait at once."""
                for task in (*clients, *feeds):
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise AssertionError(f"a chat failed: {task.exception()!r}")
                return sum(c.answered for c in ws_chats) + len(shown)

            try:
                kills = await _chaos(cluster, answered, started)
                await wait_until(lambda: answered() >= TOTAL, timeout=180)
                elapsed = time.monotonic() - started
                await asyncio.gather(*feeds)
            finally:
                for task in (*clients, *feeds):
                    task.cancel()
                await asyncio.gather(*clients, *feeds, return_exceptions=True)
                await _evidence(tmp_path / "cluster" / "logs", postgres_url, asked, fs, ws_chats)
        codes = cluster.exit_codes
        retried = [e for e in cluster.nginx.access_log() if "," in e["upstream"]]

    latency = await _latencies(postgres_url)
    report(
        "cluster_chaos",
        messages=TOTAL,
        kills=[k.__dict__ for k in kills],
        answered_in_secs=round(elapsed, 2),
        msg_per_sec=round(TOTAL / elapsed, 1),
        record_to_send_secs={
            "p50": round(latency[len(latency) // 2], 2),
            "p99": round(latency[len(latency) * 99 // 100], 2),
            "max": round(latency[-1], 2),
        },
        llm_requests=len(llm.requests),
        ws_reconnects=sum(c.reconnects for c in ws_chats),
        ws_reconnect_causes=sum((c.why for c in ws_chats), Counter()).most_common(5),
        ws_duplicate_acks=sum(c.duplicates for c in ws_chats),
        ws_error_frames=sum(len(c.errors) for c in ws_chats),
        ws_replies_delivered_again=sum(c.again for c in ws_chats),
        webhook_redeliveries=sum(c.redeliveries for c in fs_chats),
        webhook_redelivery_causes=sum((c.why for c in fs_chats), Counter()).most_common(5),
        feishu_uuid_resends=len(fs.duplicates),
        nginx_requests_passed_to_another_worker=len(retried),
        exit_codes=codes,
    )

    # the kills landed amid the load, and every worker was killed
    assert len(kills) == len(KILL_AT)
    assert all(k.answered < TOTAL for k in kills), kills
    assert {k.worker for k in kills} == {w.name for w in cluster.workers}
    assert set(codes.values()) == {0}, codes  # each worker's last life stopped cleanly

    # WebSocket: each message one reply (one outbox id), the echo of its text, in order
    wrong = {}
    for chat in ws_chats:
        expected = {f"m{n}": [f"echo: {text_of(chat.chat_id, n)}"] for n in range(PER_CHAT)}
        got = {reply_to: list(by_id.values()) for reply_to, by_id in chat.replies.items()}
        if got != expected or chat.arrival != [f"m{n}" for n in range(PER_CHAT)]:
            wrong[chat.chat_id] = {"replies": got, "arrival": chat.arrival}
    assert wrong == {}

    # Feishu: each message one reply shown in the chat, in order (a resent uuid is not shown)
    assert len(fs.sent) == len(fs_chats) * PER_CHAT, [s for s in fs.sent if s.kind != "reply"]
    shown_wrong = {}
    for fs_chat in fs_chats:
        prefix = f"om_{fs_chat.chat_id}_"
        seen = [(s.kind, s.target, s.text) for s in fs.sent if s.target.startswith(prefix)]
        if seen != [
            ("reply", fs_chat.message_id(n), f"echo: {text_of(fs_chat.chat_id, n)}")
            for n in range(PER_CHAT)
        ]:
            shown_wrong[fs_chat.chat_id] = [
                f"{target[len(prefix) :]}: {text}" for _, target, text in seen
            ]
    assert shown_wrong == {}

    # the database: every message done with one reply, sent; each chat's history in order
    rows = await _database(postgres_url)
    assert len(rows["inbox"]) == TOTAL
    assert set(rows["inbox"]) == {("done", 1, "sent", "sent")}
    assert rows["outbox"] == [("sent", TOTAL)]
    history: dict[str, list[tuple[str, str]]] = {}
    for chat_id, role, content in rows["messages"]:
        history.setdefault(str(chat_id), []).append((str(role), str(content)))
    stored_wrong = {}
    for chat_id in [c.chat_id for c in ws_chats] + [c.chat_id for c in fs_chats]:
        expected_history = [
            (role, text)
            for n in range(PER_CHAT)
            for role, text in (
                ("user", text_of(chat_id, n)),
                ("assistant", f"echo: {text_of(chat_id, n)}"),
            )
        ]
        if history.get(chat_id) != expected_history:
            stored_wrong[chat_id] = history.get(chat_id)
    assert stored_wrong == {}
    assert len(history) == CHATS
