"""The prompt-cache emulation the caching figures rest on (tests/fakes/prompt_cache.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.prompt_cache import AnthropicCache, CacheRequestError, OpenAICache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _text(words: int, word: str = "w") -> str:
    return " ".join([word] * words)


def _anthropic(*turns: str, ttl: str | None = None) -> dict[str, Any]:
    """A body: a 600-word system block (breakpoint) and user turns, the last one marked."""
    control: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    messages: list[dict[str, Any]] = []
    for n, text in enumerate(turns):
        block: dict[str, Any] = {"type": "text", "text": text}
        if n == len(turns) - 1:
            block["cache_control"] = control
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": [block]})
    system = [{"type": "text", "text": _text(600, "sys"), "cache_control": control}]
    return {"model": "m", "system": system, "messages": messages}


def test_anthropic_reads_a_repeated_prefix_and_writes_the_rest() -> None:
    cache = AnthropicCache(clock=Clock())
    first = cache.usage(_anthropic(_text(500)))
    assert first == {
        "input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 1100,
    }
    second = cache.usage(_anthropic(_text(500), "ok", _text(30)))
    assert second == {
        "input_tokens": 0,
        "cache_read_input_tokens": 1100,  # found by looking back from the new breakpoint
        "cache_creation_input_tokens": 31,
    }
    changed = cache.usage(_anthropic(_text(500, "x"), "ok", _text(30)))
    assert changed["cache_read_input_tokens"] == 0  # system alone is under 1,024: never stored


def test_anthropic_entries_expire_after_their_ttl_unless_used() -> None:
    clock = Clock()
    cache = AnthropicCache(clock=clock)
    body = _anthropic(_text(500))
    cache.usage(body)
    clock.now += 299
    assert cache.usage(body)["cache_read_input_tokens"] == 1100  # a hit starts the TTL again
    clock.now += 299
    assert cache.usage(body)["cache_read_input_tokens"] == 1100
    clock.now += 301
    assert cache.usage(body)["cache_read_input_tokens"] == 0
    long = _anthropic(_text(500, "y"), ttl="1h")
    cache.usage(long)
    clock.now += 3000
    assert cache.usage(long)["cache_read_input_tokens"] == 1100


def test_anthropic_looks_back_twenty_blocks_only() -> None:
    cache = AnthropicCache(clock=Clock())
    turns = [_text(500)] + [f"turn {n}" for n in range(30)]
    cache.usage(_anthropic(turns[0]))
    assert cache.usage(_anthropic(*turns[:20]))["cache_read_input_tokens"] == 1100
    cache2 = AnthropicCache(clock=Clock())
    cache2.usage(_anthropic(turns[0]))
    assert cache2.usage(_anthropic(*turns[:21]))["cache_read_input_tokens"] == 0


def test_anthropic_breakpoint_rules() -> None:
    cache = AnthropicCache()
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body = {"model": "m", "system": [marked] * 3, "messages": [{"role": "user", "content": []}]}
    cache.validate(body)
    body["messages"] = [{"role": "user", "content": [marked, marked]}]
    with pytest.raises(CacheRequestError, match="A maximum of 4 blocks"):
        cache.validate(body)
    late = {**marked, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    with pytest.raises(CacheRequestError, match="1h"):
        cache.validate({"model": "m", "system": [marked, late], "messages": []})
    assert cache.usage({"model": "m", "messages": [{"role": "user", "content": "a b"}]}) == {
        "input_tokens": 2,  # no breakpoint: nothing cached
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def _openai(words: int, last: str, key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [
            {"role": "system", "content": _text(words)},
            {"role": "user", "content": last},
        ],
    }
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def test_openai_caches_the_longest_prefix_in_128_token_steps_from_1024() -> None:
    clock = Clock()
    cache = OpenAICache(clock=clock)
    assert cache.cached_tokens(_openai(1000, "a")) == 0
    assert cache.cached_tokens(_openai(1000, "b")) == 0  # 1,000 shared: under the minimum
    assert cache.cached_tokens(_openai(1300, "a")) == 0
    assert cache.cached_tokens(_openai(1300, "b")) == 1280
    assert cache.cached_tokens(_openai(1300, "b", key="other")) == 0  # another key
    clock.now += 601
    assert cache.cached_tokens(_openai(1300, "c")) == 0  # gone after ten idle minutes
