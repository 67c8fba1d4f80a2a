"""The JSON body of a chat-completions request, built once per message.

A conversation's request is its previous request plus a few messages: the
history is append-only and the same `ChatMessage` objects come back turn
after turn (gateway.turns.opener keeps them). Converting every message to its wire
dict and JSON-encoding the whole body again on every call is the one cost of
a turn that grows with the history; here the messages a request shares with
the conversation's last one (`LLMRequest.cache_key`), the same objects from
the start, keep their encoded pieces, only the rest is converted and
encoded, and the body is the joined pieces, sent as they are
(agent.providers.openai). The pieces are kept joined, each one's end
noted: joining 8,000 pieces anew took more CPU than the rest of the body
(0.5–1.5 ms a turn on the bench machine), where cutting the joined bytes
back to the shared prefix and appending the new pieces costs what the new
pieces do.

A `trailer` adds wire messages after a message that depend on the one that
follows it (chat completions carry a tool result's images in a user message
after the last tool message of the run, agent.providers.openai); the piece
of the last shared message, when it is a tool result, is then converted
again, as the run it ended may go on.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agent.messages import ChatMessage, Role, shared_prefix

__all__ = ["BodyEncoder", "Trailer"]

Convert = Callable[[ChatMessage], Awaitable[dict[str, Any]]]
# (the request's messages, i) → the wire messages that follow message i's own
Trailer = Callable[[Sequence[ChatMessage], int], Awaitable[list[dict[str, Any]]]]

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _message_json(message: dict[str, Any]) -> bytes:
    """A message's wire dict as JSON: by orjson, in a fifteenth of json's time
    and to the same bytes (compact, UTF-8 as it is); by json for what orjson
    refuses (an integer beyond 64 bits). A message holds no float that
    orjson would write as null where json refuses it: parameters, which may,
    keep json (`_encode`)."""
    try:
        return orjson.dumps(message)
    except TypeError:
        return _encode(message).encode()


_CONVERSATIONS: Final = 32  # kept: the warm ones; a colder one is encoded afresh


@dataclass(slots=True)
class _Sent:
    """A conversation's last request: its messages, their JSON pieces
    joined by commas, and where each piece ends in `joined`."""

    messages: list[ChatMessage]
    joined: bytearray
    ends: list[int]

    def keep(self, count: int) -> None:
        """Only the first `count` pieces stay."""
        del self.ends[count:]
        del self.joined[self.ends[-1] if self.ends else 0 :]

    def add(self, piece: bytes) -> None:
        if self.ends:
            self.joined += b","
        self.joined += piece
        self.ends.append(len(self.joined))


class BodyEncoder:
    def __init__(
        self, convert: Convert, *, capacity: int = _CONVERSATIONS, trailer: Trailer | None = None
    ) -> None:
        """`convert`: one message → its wire dict (e.g. with its images loaded)."""
        self._convert = convert
        self._trailer = trailer
        self._capacity = capacity
        self._sent: OrderedDict[str, _Sent] = OrderedDict()
        self._tools: tuple[tuple[object, ...], bytes] | None = None

    async def body(
        self,
        conversation: str | None,
        messages: Sequence[ChatMessage],
        tools: Sequence[object],
        encode_tools: Callable[[], list[dict[str, Any]]],
        params: dict[str, Any],
    ) -> bytes:
        """`{"messages": [...], "tools": [...], **params}` as JSON bytes."""
        messages = list(messages)  # kept: a caller may change its own list later
        last = self._sent.pop(conversation, None) if conversation is not None else None
        sent = last or _Sent([], bytearray(), [])  # ours: it left the cache
        same = shared_prefix(messages, sent.messages)
        if self._trailer is not None and same and messages[same - 1].role is Role.TOOL:
            same -= 1  # its trailer depends on what follows it, which may have changed
        sent.keep(same)
        for i in range(same, len(messages)):
            piece = _message_json(await self._convert(messages[i]))
            if self._trailer is not None:
                for extra in await self._trailer(messages, i):
                    piece += b"," + _message_json(extra)
            sent.add(piece)
        sent.messages = messages
        if conversation is not None:
            self._sent[conversation] = sent
            while len(self._sent) > self._capacity:
                self._sent.popitem(last=False)
        out: list[bytes | bytearray] = [b'{"messages":[', sent.joined, b"]"]
        if tools:
            out += [b',"tools":', self._tools_json(tools, encode_tools)]
        if params:
            out += [b",", _encode(params).encode()[1:-1]]
        out.append(b"}")
        return b"".join(out)

    def _tools_json(
        self, tools: Sequence[object], encode_tools: Callable[[], list[dict[str, Any]]]
    ) -> bytes:
        """The same tool list (the same spec objects) is encoded once."""
        key = tuple(tools)
        cached = self._tools
        if (
            cached is not None
            and len(cached[0]) == len(key)
            and all(a is b for a, b in zip(cached[0], key, strict=True))
        ):
            return cached[1]
        encoded = _encode(encode_tools()).encode()
        self._tools = (key, encoded)
        return encoded
