"""The fake OpenAI (or Anthropic) server in its own process for benchmarks,
so its CPU does not count against the gateway: `python -m bench.fake_llm
DELAY_SECS [RECORD COUNT [openai|anthropic]]`. Prints its base URL on the
first line, then serves until stdin closes. With RECORD, the first COUNT
request bodies are written there, one JSON line each; no body is kept in
memory past its answer (a long run with a long history would otherwise grow
without bound)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedLLMServer


class _Recording(ScriptedLLMServer):
    record: Path | None = None
    count = 0
    seen = 0

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body = await super()._record(request)
        self.seen += 1
        if self.record is not None and self.seen <= self.count:
            with self.record.open("a") as f:  # with the size it had on the wire
                f.write(json.dumps({"wire_bytes": request.content_length, "body": body}) + "\n")
        self.requests.clear()
        self.request_headers.clear()
        self.billed.clear()
        return body


def _counts(body: dict[str, Any], reply: Reply) -> tuple[int, int]:
    """(prompt, completion) tokens, roughly: the body's JSON at 4 bytes a
    token. The test fakes count every word of the body and simulate the
    provider's prompt cache on it, which took more than half of this
    process's CPU under the bench's load; on 2 cores that CPU was taken from
    the gateway it measures. The gateway only reports usage (metrics, cost)."""
    return len(orjson.dumps(body)) // 4, len(reply.text) // 4


class BenchLLM(_Recording, FakeOpenAI):
    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prompt, completion = _counts(body, reply)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        }


class BenchAnthropic(_Recording, FakeAnthropic):
    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        prompt, completion = _counts(body, reply)
        return {"input_tokens": prompt, "output_tokens": completion}


async def main(delay: float, record: Path | None, count: int, kind: str = "openai") -> None:
    llm = BenchAnthropic() if kind == "anthropic" else BenchLLM()
    llm.record, llm.count = record, count
    async with llm:
        llm.delay = delay
        print(llm.base_url, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


if __name__ == "__main__":
    path = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    asyncio.run(main(float(sys.argv[1]), path, count, *sys.argv[4:5]))
