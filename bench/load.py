"""Load generator, run as its own process so that it does not share the
gateway's event loop: `python -m bench.load URL CLIENTS SECONDS` (scenario b)
or `python -m bench.load URL CHATS fanout` (scenario a).
Prints one JSON object: messages, seconds, latencies (ms percentiles)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from bench.harness import ask, connect, percentiles

CHAT_LENGTH = 100  # messages per chat before a client moves on to a fresh chat


async def client(
    url: str, index: int, until: float, warmup_until: float, out: list[float], sent: list[int]
) -> None:
    n = 0
    while True:
        ws = await connect(url, f"load-{index}-{time.time_ns()}")
        try:
            for _ in range(CHAT_LENGTH):
                now = time.perf_counter()
                if now >= until:
                    return
                n += 1
                latency = await ask(ws, f"m{n}", "ping")
                sent[0] += 1
                if now >= warmup_until:
                    out.append(latency)
        finally:
            await ws.close()


async def fanout(url: str, chats: int) -> None:
    """Every chat connected first; then all send one message at once."""
    sockets = await asyncio.gather(
        *(connect(url, f"fan-{i}-{time.time_ns()}") for i in range(chats))
    )
    t0 = time.perf_counter()
    latencies = await asyncio.gather(*(ask(ws, "m1", f"hello {i}") for i, ws in enumerate(sockets)))
    wall = time.perf_counter() - t0
    for ws in sockets:
        await ws.close()
    print(
        json.dumps(
            {
                "wall_secs_until_last_reply": round(wall, 3),
                "replies": len(latencies),
                "fastest_reply_secs": round(min(latencies), 3),
            }
        )
    )


async def main(url: str, clients: int, seconds: float) -> None:
    start = time.perf_counter()
    warmup_until = start + min(1.0, seconds / 5)
    until = warmup_until + seconds
    samples: list[float] = []
    sent = [0]  # every message answered, warm-up included
    await asyncio.gather(
        *(client(url, i, until, warmup_until, samples, sent) for i in range(clients))
    )
    print(
        json.dumps(
            {
                "messages": len(samples),
                "seconds": seconds,
                "answered_in_all": sent[0],
                **percentiles(samples),
            }
        )
    )


if __name__ == "__main__":
    if sys.argv[3] == "fanout":
        asyncio.run(fanout(sys.argv[1], int(sys.argv[2])))
    else:
        asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
