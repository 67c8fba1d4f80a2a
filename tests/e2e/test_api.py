"""The OpenAI-compatible API (channels.api, docs/api.md) through a whole
gateway, with the official `openai` SDK as the client: completions whole and
streamed, sessions by header, models, idempotent retries, a fetch after the
client left, keys and who may read what."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.support import make_config, running_gateway

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789"}


def _config(home: Path, llm: FakeOpenAI, **api: Any) -> Any:
    return make_config(
        home,
        llm.base_url,
        channels={"api": {"enabled": True, "keys": KEYS, **api}},
        agents={"default": {}, "coder": {}},
    )


def _client(port: int, key: str = KEYS["alice"]) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0)


def _session(name: str, **more: str) -> dict[str, str]:
    return {"X-Picobot-Session": name, **more}


def _sent(llm: FakeOpenAI, n: int = -1) -> str:
    return json.dumps(llm.requests[n]["messages"], ensure_ascii=False)


async def test_completions_whole_and_streamed_keep_the_sessions_history(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(_config(home, llm)) as gw, _client(gw.port) as client:
        first = await client.chat.completions.create(
            model="picobot",
            messages=[{"role": "user", "content": "my name is Ada"}],
            extra_headers=_session("s1"),
        )
        assert first.choices[0].message.content == "echo: my name is Ada"
        assert first.usage is not None
        assert first.usage.prompt_tokens > 0
        second = await client.chat.completions.create(
            model="picobot",
            messages=[{"role": "user", "content": "what is my name?"}],
            extra_headers=_session("s1"),
        )
        assert second.choices[0].message.content == "echo: what is my name?"
        assert "my name is Ada" in _sent(llm)  # the stored history went with it

        stream = await client.chat.completions.create(
            model="picobot/coder",
            messages=[{"role": "user", "content": "stream please"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=_session("s1"),
        )
        text, usage, finishes = "", None, []
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finishes.append(choice.finish_reason)
        assert text == "echo: stream please"
        assert finishes[-1] == "stop"
        assert usage is not None
        assert usage.total_tokens > 0
        assert "what is my name?" in _sent(llm)

        models = [m.id for m in (await client.models.list()).data]
        assert models == ["picobot", "picobot/default", "picobot/coder"]


async def test_a_retry_with_the_same_key_is_one_turn_and_the_same_answer(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(_config(home, llm)) as gw, _client(gw.port) as client:
        asks = [
            client.chat.completions.create(
                model="picobot",
                messages=[{"role": "user", "content": "only once"}],
                extra_headers=_session("s2", **{"Idempotency-Key": "k-1"}),
            )
            for _ in range(2)
        ]
        first = await asks[0]
        again = await asks[1]
    assert first.choices[0].message.content == again.choices[0].message.content
    assert first.id == again.id
    assert [last_user_text(r["messages"]) for r in llm.requests] == ["only once"]


async def test_a_client_that_left_mid_stream_fetches_the_answer(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.hold()
    async with running_gateway(_config(home, llm)) as gw, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{gw.port}/v1"
        auth = {"Authorization": f"Bearer {KEYS['alice']}", **_session("s3")}
        body = {"model": "picobot", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        async with http.post(
            f"{url}/chat/completions", json=body, headers={**auth, "Idempotency-Key": "k-2"}
        ) as response:
            first = await response.content.readline()  # the role chunk: then the client leaves
            assert first.startswith(b"data: ")
        await llm.wait_requests(1)
        async with http.get(f"{url}/picobot/replies/k-2", headers=auth) as pending:
            assert pending.status == 202
        llm.release()
        retry = {**body, "stream": False}  # the same key again: waits for the one answer
        headers = {**auth, "Idempotency-Key": "k-2"}
        async with http.post(f"{url}/chat/completions", json=retry, headers=headers) as again:
            assert again.status == 200
            retried = await again.json()
        async with http.get(f"{url}/picobot/replies/k-2", headers=auth) as fetched:
            assert fetched.status == 200
            answer = await fetched.json()
        assert answer["choices"][0]["message"]["content"] == "echo: hi"
        assert answer["id"] == retried["id"]
        assert len(llm.requests) == 1
        async with http.get(f"{url}/picobot/replies/nope", headers=auth) as unknown:
            assert unknown.status == 404


async def test_keys_and_principals(home: Path, llm: FakeOpenAI) -> None:
    async with (
        running_gateway(_config(home, llm)) as gw,
        _client(gw.port, "wrong-key") as stranger,
        _client(gw.port) as alice,
        _client(gw.port, KEYS["bob"]) as bob,
    ):
        with pytest.raises(openai.AuthenticationError):
            await stranger.chat.completions.create(
                model="picobot", messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(openai.AuthenticationError):
            await stranger.models.list()
        await alice.chat.completions.create(
            model="picobot",
            messages=[{"role": "user", "content": "alice's secret plan"}],
            extra_headers=_session("shared", **{"Idempotency-Key": "k-3"}),
        )
        await bob.chat.completions.create(
            model="picobot",
            messages=[{"role": "user", "content": "bob here"}],
            extra_headers=_session("shared"),
        )
        assert "alice's secret plan" not in _sent(llm)  # bob's "shared" is his own
        with pytest.raises(openai.NotFoundError):
            await bob.chat.completions.create(
                model="picobot/nobody", messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(openai.BadRequestError, match="client-side tools"):
            await bob.chat.completions.create(
                model="picobot",
                messages=[{"role": "user", "content": "x"}],
                tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
            )
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{gw.port}/v1/picobot/replies/k-3"
            headers = {"Authorization": f"Bearer {KEYS['bob']}", **_session("shared")}
            async with http.get(url, headers=headers) as response:
                assert response.status == 404  # alice's request is not bob's to read


async def test_a_slow_answer_is_504_then_fetched_and_the_session_stays_busy_until_it_comes(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.hold()
    async with (
        running_gateway(_config(home, llm, reply_timeout_secs=2)) as gw,
        aiohttp.ClientSession() as http,
    ):
        url = f"http://127.0.0.1:{gw.port}/v1"
        auth = {"Authorization": f"Bearer {KEYS['alice']}", **_session("slow")}
        body = {"model": "picobot", "messages": [{"role": "user", "content": "think hard"}]}
        headers = {**auth, "Idempotency-Key": "k-slow"}
        async with http.post(f"{url}/chat/completions", json=body, headers=headers) as late:
            assert late.status == 504
            error = (await late.json())["error"]
        assert error["code"] == "reply_pending"
        assert "/v1/picobot/replies/k-slow " in error["message"]  # the key as the client sent it
        async with http.post(f"{url}/chat/completions", json=body, headers=auth) as busy:
            assert busy.status == 409  # the turn still runs
        llm.release()
        async with http.post(f"{url}/chat/completions", json=body, headers=headers) as again:
            assert again.status == 200  # the same key: the one answer, once it came
        async with http.get(f"{url}/picobot/replies/k-slow", headers=auth) as fetched:
            assert fetched.status == 200
        body["messages"] = [{"role": "user", "content": "next"}]
        async with http.post(f"{url}/chat/completions", json=body, headers=auth) as free:
            assert free.status == 200  # the reply came: the session is free again
            assert (await free.json())["choices"][0]["message"]["content"] == "echo: next"


async def test_an_oversized_body_is_413_before_it_is_all_read(home: Path, llm: FakeOpenAI) -> None:
    async with (
        running_gateway(_config(home, llm, max_request_bytes=2048)) as gw,
        aiohttp.ClientSession() as http,
    ):
        body = {"model": "picobot", "messages": [{"role": "user", "content": "x" * 5000}]}
        headers = {"Authorization": f"Bearer {KEYS['alice']}"}
        url = f"http://127.0.0.1:{gw.port}"
        async with http.post(f"{url}/v1/chat/completions", json=body, headers=headers) as big:
            assert big.status == 413
        async with http.post(f"{url}/mcp", data=b"x" * 1_000_001, headers=headers) as big:
            assert big.status == 413
    assert llm.requests == []
