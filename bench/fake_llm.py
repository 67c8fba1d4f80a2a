"""The fake OpenAI server in its own process for benchmarks, so its CPU does
not count against the gateway: `python -m bench.fake_llm DELAY_SECS`.
Prints its base URL on the first line, then serves until stdin closes."""

from __future__ import annotations

import asyncio
import sys

from tests.fakes.openai_server import FakeOpenAI


async def main(delay: float) -> None:
    async with FakeOpenAI() as llm:
        llm.delay = delay
        print(llm.base_url, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
