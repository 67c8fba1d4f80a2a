"""The console's delivery API (/api/ops/outbox, /dead-letters, /channels)
against a running gateway: what it shows is what the database holds, with
every registered secret masked, and its actions change the database as
`picobot outbox retry|discard` and `picobot dead-letters retry|discard` do.

A poison inbound message: the inbox refuses it alone (a trigger in the
database stands for whatever refused it, a bug or a constraint), so it is
kept as a dead letter and its sender told so. Once the cause is gone, a
retry from the console records it and it is answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.base import TransientSendError
from gateway.app import Gateway
from gateway.ops.logging import MASK
from tests.consoles import REFUSE_POISON, planted_secret
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.support import make_config, running_gateway, wait_until, ws_client

SECRET = "zq-planted-secret-0d1e2a7c"


@pytest.fixture(autouse=True)
def _secret() -> Iterator[str]:
    with planted_secret(SECRET) as secret:
        yield secret


async def _rows(gw: Gateway, sql: str, *params: object) -> list[tuple[Any, ...]]:
    assert gw.db is not None
    return await gw.db.read(lambda c: [tuple(r) for r in c.execute(sql, params).fetchall()])


async def _call(
    http: aiohttp.ClientSession, gw: Gateway, method: str, path: str
) -> tuple[int, dict[str, Any], str]:
    async with http.request(method, f"{gw.base_url}/api/ops{path}") as response:
        body = await response.text()
        return response.status, json.loads(body), body


async def test_a_poison_message_is_shown_masked_retried_and_answered_and_a_raw_event_discarded(
    home: Path, llm: FakeOpenAI
) -> None:
    rec = RecordingChannel()
    async with (
        running_gateway(make_config(home, llm.base_url), extra_channels=[rec]) as gw,
        aiohttp.ClientSession() as http,
        ws_client(gw, "poison-chat") as client,
    ):
        assert gw.db is not None
        await gw.db.write(lambda c: c.execute(REFUSE_POISON))
        sent = await client.send(f"poison {SECRET} please")
        assert (await client.recv_type("ack"))["status"] == "dead_letter"
        # a platform event the channel could not read, with a secret-looking key
        raw = {"update_id": 9, "message": "not a message", "token": "tok-1234567890abcdef"}
        assert rec.runtime is not None
        await rec.runtime.dead_letter("9", json.dumps(raw), "malformed update: TypeError")

        stored = await _rows(gw, "SELECT id, channel, platform_id, payload FROM dead_letters")
        [(poison_id, _, platform_id, payload), (raw_id, *_)] = sorted(stored)
        assert SECRET in payload  # the database keeps it; the console must not show it
        status, listing, body = await _call(http, gw, "GET", "/dead-letters")
        assert status == 200
        assert SECRET not in body
        assert [
            (d["id"], d["channel"], d["platform_id"], d["retryable"]) for d in listing["letters"]
        ] == [
            (raw_id, "rec", "9", False),
            (poison_id, "websocket", platform_id, True),
        ]
        status, letter, body = await _call(http, gw, "GET", f"/dead-letters/{poison_id}")
        assert status == 200
        assert SECRET not in body
        assert json.loads(letter["payload"])["text"] == f"poison {MASK} please"
        assert letter["reason"] == "not recorded: IntegrityError"
        status, event, body = await _call(http, gw, "GET", f"/dead-letters/{raw_id}")
        assert json.loads(event["payload"]) == {**raw, "token": MASK}
        assert "tok-1234567890abcdef" not in body

        # a raw event cannot be recorded; nor can the message while the cause stays
        status, refused, _ = await _call(http, gw, "POST", f"/dead-letters/{raw_id}/retry")
        assert (status, refused["error"]) == (
            409,
            f"dead letter {raw_id} is not a message the gateway wrote "
            "(a rec event it could not read): it can only be discarded",
        )
        status, refused, _ = await _call(http, gw, "POST", f"/dead-letters/{poison_id}/retry")
        assert status == 409
        assert refused["error"].startswith("the inbox refused it again (IntegrityError)")
        assert len(await _rows(gw, "SELECT id FROM dead_letters")) == 2
        assert await _rows(gw, "SELECT id FROM inbox") == []

        await gw.db.write(lambda c: c.execute("DROP TRIGGER refuse_poison"))
        status, retried, _ = await _call(http, gw, "POST", f"/dead-letters/{poison_id}/retry")
        assert status == 200
        reply = await client.recv_type("message")
        assert (reply["reply_to"], reply["text"]) == (sent, f"echo: poison {SECRET} please")
        assert await _rows(gw, "SELECT id, platform_id FROM inbox") == [
            (retried["inbox_id"], platform_id)
        ]
        await wait_until(
            lambda: _rows(gw, "SELECT 1 FROM inbox WHERE state = 'done'")
        )  # closed once answered
        assert retried == {
            "retried": poison_id,
            "inbox_id": retried["inbox_id"],
            "duplicate": False,
        }
        assert await _rows(gw, "SELECT id FROM dead_letters") == [(raw_id,)]

        status, _, _ = await _call(http, gw, "POST", f"/dead-letters/{raw_id}/discard")
        assert status == 200
        assert await _rows(gw, "SELECT id FROM dead_letters") == []
        status, gone, _ = await _call(http, gw, "POST", f"/dead-letters/{raw_id}/discard")
        assert (status, gone["error"]) == (404, f"no dead letter {raw_id}")
        status, listing, _ = await _call(http, gw, "GET", "/dead-letters")
        assert listing == {"letters": []}
    assert len(llm.requests) == 1  # the retried message, once


async def _failed_row(gw: Gateway, rec: RecordingChannel, text: str, attempts: int) -> int:
    rec.fail_permanently()
    await rec.submit("c1", text)
    await rec.wait_attempts(attempts)
    assert gw.dispatcher is not None
    await gw.dispatcher.flush(5)  # the failure is recorded
    [(row_id,)] = await _rows(gw, "SELECT id FROM outbox WHERE state = 'failed'")
    return int(row_id)


async def test_a_failed_row_is_retried_and_another_discarded_and_each_channel_health_shown(
    home: Path, llm: FakeOpenAI
) -> None:
    rec, down = RecordingChannel(), RecordingChannel("down")
    down.fail_forever = TransientSendError("platform down")
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"outbound_retry_base_secs": 0.05, "outbound_retry_max_secs": 0.2},
    )
    async with (
        running_gateway(loaded, extra_channels=[rec, down]) as gw,
        aiohttp.ClientSession() as http,
    ):
        first = await _failed_row(gw, rec, "first", 1)
        status, outbox, body = await _call(http, gw, "GET", "/outbox?state=failed")
        assert status == 200
        assert outbox["counts"] == {"failed": 1}
        assert [(r["id"], r["state"], r["preview"]) for r in outbox["rows"]] == [
            (first, "failed", "echo: first")
        ]
        assert "PermanentSendError: bot was blocked by the user" in body
        _, channels, _ = await _call(http, gw, "GET", "/channels")
        health = {c["name"]: c for c in channels["channels"]}
        assert health["rec"]["connected"] is True
        assert health["rec"]["degraded"] is None
        assert health["rec"]["last_error"] == "PermanentSendError: bot was blocked by the user"
        assert health["rec"]["last_sent_at"] is None

        rec.fail_forever = None
        status, retried, _ = await _call(http, gw, "POST", f"/outbox/{first}/retry")
        assert (status, retried) == (200, {"retried": first})
        assert [s.message.text for s in await rec.wait_sent(1)] == ["echo: first"]
        await wait_until(lambda: _rows(gw, "SELECT 1 FROM outbox WHERE state = 'sent'"))
        _, channels, _ = await _call(http, gw, "GET", "/channels")
        assert {c["name"]: c for c in channels["channels"]}["rec"]["last_sent_at"] is not None

        second = await _failed_row(gw, rec, "second", 3)
        status, discarded, _ = await _call(http, gw, "POST", f"/outbox/{second}/discard")
        assert (status, discarded) == (200, {"discarded": second})
        assert await _rows(
            gw, "SELECT id, state FROM outbox WHERE channel = 'rec' ORDER BY id"
        ) == [
            (first, "sent"),
            (second, "discarded"),
        ]
        for action in ("discard", "retry"):  # a discarded row is done with
            status, refused, _ = await _call(http, gw, "POST", f"/outbox/{second}/{action}")
            assert (status, refused["error"]) == (
                409,
                f"outbox row {second} is not failed or parked",
            )
        _, shown, _ = await _call(http, gw, "GET", "/outbox?state=discarded")
        assert [r["id"] for r in shown["rows"]] == [second]
        assert shown["counts"]["discarded"] == 1
        status, bad, _ = await _call(http, gw, "GET", "/outbox?state=lost")
        assert (status, bad["error"]) == (
            400,
            "state must be one of pending, parked, sent, failed, discarded",
        )

        # a channel whose platform does not answer: degraded, with its last error
        await down.submit("d1", "anyone there?")
        await wait_until(
            lambda: gw.dispatcher is not None and gw.dispatcher.sending_problem("down")
        )

        _, channels, _ = await _call(http, gw, "GET", "/channels")
        shown_down = {c["name"]: c for c in channels["channels"]}["down"]
        assert shown_down["connected"] is True
        assert shown_down["degraded"].startswith("sending degraded since")
        assert "platform down" in shown_down["last_error"]
        assert shown_down["last_sent_at"] is None
        assert channels["ready"] is False
        [check] = [c for c in channels["checks"] if c["name"] == "channel down"]
        assert (check["ok"], check["reason"]) == (False, shown_down["degraded"])
    sent = [s.message.text for s in rec.sent]
    assert sent == ["echo: first"]  # the discarded reply never went
