"""Prompt-cache emulation for the fake LLM servers, as the services describe it.

A "token" is what the fakes already count (`count_words`): one
whitespace-separated word of the text inside the request. Keys such as
`role`, `type` and ids are not counted, but they are part of what has to
repeat: every word is hashed together with its place in the request.

Anthropic (`AnthropicCache`, docs: "Prompt caching"): caching only happens
at breakpoints, blocks marked `cache_control` (a top-level `cache_control`
marks the last block). The prompt is the sequence of blocks tools → system →
messages (a string content counts as one text block). At most 4 breakpoints
(400 otherwise), and a 1h one may not follow a 5m one. For every breakpoint
the cache is looked up at that block and up to 19 blocks before it (the
documented 20-block lookback); the longest cached prefix found is read
(`cache_read_input_tokens`, its entry's TTL refreshed). The prefix up to each
breakpoint is then stored for its TTL (5m default, or 1h) unless it is shorter
than `min_tokens` (1,024: shorter prefixes are not cached);
`cache_creation_input_tokens` is what lies between the read prefix and the
last stored breakpoint; `input_tokens` is the rest.

OpenAI (`OpenAICache`, docs: "Prompt caching"): automatic, no markers. The
prompt is tools then messages; the longest prefix it shares with an earlier
request (same model and `prompt_cache_key`) seen within the last ten minutes
is reported as `prompt_tokens_details.cached_tokens` if it is at least 1,024
tokens, counted in steps of 128. The key only partitions the cache here (the
real service uses it to route requests to the machine holding the cache).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["AnthropicCache", "CacheRequestError", "OpenAICache"]

Clock = Callable[[], float]

# the keys `count_words` skips (tests.fakes.openai_server._NOT_COUNTED)
_NOT_COUNTED = {"role", "type", "id", "tool_call_id", "tool_use_id", "url", "data", "media_type"}
_TTL_SECS = {"5m": 300.0, "1h": 3600.0}


class CacheRequestError(ValueError):
    """The request breaks a prompt-caching rule; the server answers 400 with this text."""


def _words(value: Any, path: str) -> Iterator[str]:
    """Counted words of `value`, each tagged with where it is."""
    if isinstance(value, str):
        for word in value.split():
            yield f"{path}|{word}"
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_COUNTED and key != "cache_control":
                yield from _words(item, f"{path}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _words(item, f"{path}[{n}]")


class _Entries:
    """Cached prefixes by digest, each with the time it expires."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._entries: dict[str, tuple[float, float]] = {}  # digest → (expiry, ttl)

    def hit(self, digest: str) -> bool:
        """Whether `digest` is cached; a hit starts its TTL again."""
        entry = self._entries.get(digest)
        if entry is None or entry[0] <= self.clock():
            return False
        self._entries[digest] = (self.clock() + entry[1], entry[1])
        return True

    def store(self, digest: str, ttl_secs: float) -> None:
        entry = self._entries.get(digest)
        ttl = max(ttl_secs, entry[1]) if entry is not None and entry[0] > self.clock() else ttl_secs
        self._entries[digest] = (self.clock() + ttl, ttl)


@dataclass(frozen=True, slots=True)
class _Block:
    tokens: int
    identity: str  # what has to repeat, byte for byte
    control: dict[str, Any] | None  # its cache_control, if it is a breakpoint


def _anthropic_blocks(body: dict[str, Any]) -> list[_Block]:
    raw: list[tuple[str, Any]] = [("tools", t) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    raw += [("system", b) for b in system or []]
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        raw += [(str(message.get("role")), b) for b in content or []]
    blocks = []
    for n, (where, block) in enumerate(raw):
        control = block.get("cache_control") if isinstance(block, dict) else None
        bare = {k: v for k, v in block.items() if k != "cache_control"}
        identity = json.dumps([where, bare], sort_keys=True, ensure_ascii=False)
        blocks.append(_Block(sum(1 for _ in _words(bare, str(n))), identity, control))
    if body.get("cache_control") and blocks:  # automatic caching: the last block
        last = blocks[-1]
        blocks[-1] = _Block(last.tokens, last.identity, body["cache_control"])
    return blocks


class AnthropicCache:
    LOOKBACK_BLOCKS = 20
    MAX_BREAKPOINTS = 4

    def __init__(self, *, min_tokens: int = 1024, clock: Clock = time.monotonic) -> None:
        self.min_tokens = min_tokens
        self._entries = _Entries(clock)

    def validate(self, body: dict[str, Any]) -> None:
        """Raise CacheRequestError if the breakpoints break the API's rules."""
        self._breakpoints(_anthropic_blocks(body))

    def _breakpoints(self, blocks: list[_Block]) -> list[tuple[int, str]]:
        points = [i for i, b in enumerate(blocks) if b.control is not None]
        if len(points) > self.MAX_BREAKPOINTS:
            raise CacheRequestError(
                f"A maximum of {self.MAX_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {len(points)}."
            )
        ttls = [str((blocks[i].control or {}).get("ttl", "5m")) for i in points]
        if any(t not in _TTL_SECS for t in ttls):
            raise CacheRequestError("cache_control.ttl: Input should be '5m' or '1h'")
        if "1h" in ttls and "5m" in ttls[: len(ttls) - ttls[::-1].index("1h")]:
            raise CacheRequestError("a ttl='1h' cache_control block must not come after ttl='5m'")
        return list(zip(points, ttls, strict=True))

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """input_tokens / cache_read_input_tokens / cache_creation_input_tokens
        of this request, the cache updated; raises CacheRequestError."""
        blocks = _anthropic_blocks(body)
        breakpoints = self._breakpoints(blocks)
        digests: list[str] = []
        totals: list[int] = []  # tokens up to and including block i
        h = hashlib.sha256(str(body.get("model")).encode())
        for block in blocks:
            h.update(block.identity.encode() + b"\x1e")
            digests.append(h.hexdigest())
            totals.append((totals[-1] if totals else 0) + block.tokens)
        read_end = -1
        for point, _ in breakpoints:
            for i in range(point, max(-1, point - self.LOOKBACK_BLOCKS), -1):
                if i > read_end and self._entries.hit(digests[i]):
                    read_end = i
                    break
        stored = [(i, ttl) for i, ttl in breakpoints if totals[i] >= self.min_tokens]
        for i, ttl in stored:
            self._entries.store(digests[i], _TTL_SECS[ttl])
        read = totals[read_end] if read_end >= 0 else 0
        written_to = max((i for i, _ in stored), default=-1)
        written = max(0, (totals[written_to] if written_to >= 0 else 0) - read)
        total = totals[-1] if totals else 0
        return {
            "input_tokens": total - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }


class OpenAICache:
    MIN_TOKENS = 1024
    STEP = 128
    TTL_SECS = 600.0

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._entries = _Entries(clock)

    @staticmethod
    def prompt_tokens(body: dict[str, Any]) -> list[str]:
        tokens = list(_words(body.get("tools") or [], "tools"))
        for n, message in enumerate(body.get("messages") or []):
            role = message.get("role") if isinstance(message, dict) else None
            tokens += _words(message, f"messages[{n}]<{role}>")
        return tokens

    def cached_tokens(self, body: dict[str, Any]) -> int:
        """The cached prefix of this request, in tokens; the cache updated."""
        tokens = self.prompt_tokens(body)
        scope = f"{body.get('model')}\x1f{body.get('prompt_cache_key')}"
        h = hashlib.sha256(scope.encode())
        digests: list[str] = []  # digests[k] covers the first (k + 1) * STEP tokens
        for n, token in enumerate(tokens, 1):
            h.update(token.encode() + b"\x1e")
            if n % self.STEP == 0:
                digests.append(h.hexdigest())
        first = self.MIN_TOKENS // self.STEP - 1
        cached = 0
        for k in range(len(digests) - 1, first - 1, -1):
            if self._entries.hit(digests[k]):
                cached = (k + 1) * self.STEP
                break
        for digest in digests[first:]:
            self._entries.store(digest, self.TTL_SECS)
        return cached
