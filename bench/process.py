"""The real path: `picobot gateway` as its own process on shipped defaults,
against the fake LLM in another process over HTTP (bench.fake_llm).

Shipped defaults means the built-in defaults of every key (compaction on,
info logs as JSON lines, the real OpenAI provider and SDK, skills, memory,
the scheduler); a config only points the default provider at the fake and
binds port 0. The gateway's CPU is read per thread from /proc, so that each
figure says where it went (the event loop thread, the storage thread …).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

_TICK = os.sysconf("SC_CLK_TCK")
# a directory holding another checkout of the code: its gateway is the one run
# (compare a change with its base in the same minutes; the machine drifts)
OTHER_CODE = "BENCH_GATEWAY_CODE"


def shipped_config(base_url: str, **gateway: Any) -> dict[str, Any]:
    """The least a real install sets: where the LLM is, and a free port."""
    return {
        "providers": {"default": {"type": "openai", "base_url": base_url, "api_key": "bench"}},
        "models": {"default": {"model_id": "bench-model"}},
        "gateway": {"host": "127.0.0.1", "port": 0, **gateway},
    }


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of `pid` now: its kind and its CPU seconds so far. The main
    thread (the event loop) is `event_loop`. Read from the scheduler's
    nanosecond count (`schedstat`) where the kernel keeps it: `stat`'s clock
    ticks are 10 ms, too coarse for a few milliseconds a turn."""
    out: dict[int, tuple[str, float]] = {}
    with open(f"/proc/{pid}/comm") as f:
        main = f.read().strip()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            secs = _thread_secs(f"/proc/{pid}/task/{tid}")
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue  # the thread ended meanwhile
        out[int(tid)] = ("event_loop" if int(tid) == pid else _thread_kind(name, main), secs)
    return out


def _thread_secs(task: str) -> float:
    try:
        with open(f"{task}/schedstat") as f:
            nanos = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        nanos = 0
    if nanos:  # 0: no schedstat, or a kernel that keeps no count: the ticks in stat
        return nanos / 1e9
    with open(f"{task}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _thread_kind(name: str, main: str) -> str:
    """Python does not name its OS threads: every other thread (the storage
    thread, nearly all of it) is `other_threads`."""
    return "other_threads" if name == main else name


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


@dataclass
class CpuMeter:
    """CPU of a process between `start` and `stop`, in total and per thread
    kind. Counted per thread: one that ended meanwhile takes its whole CPU
    along, so it counts 0 (not minus what it had used before `start`)."""

    pid: int
    before: dict[int, tuple[str, float]] = field(default_factory=dict)

    def start(self) -> None:
        self.before = thread_cpu(self.pid)

    def stop(self, per: int) -> dict[str, Any]:
        """The CPU used since `start`, in ms per one of `per` units of work."""
        used: dict[str, float] = {}
        for tid, (kind, secs) in thread_cpu(self.pid).items():
            used[kind] = used.get(kind, 0.0) + secs - self.before.get(tid, (kind, 0.0))[1]
        total = sum(used.values())
        n = max(1, per)
        return {
            "cpu_ms_per_message": round(total * 1000 / n, 3),
            "cpu_ms_per_message_by_thread": {
                k: round(v * 1000 / n, 3) for k, v in sorted(used.items()) if v > 0
            },
        }


@dataclass
class FakeLLM:
    """bench.fake_llm in its own process; `recorded` holds the first requests."""

    proc: asyncio.subprocess.Process
    base_url: str
    record_path: Path

    def recorded(self) -> list[dict[str, Any]]:
        """The first request bodies, each with its `wire_bytes` (Content-Length)."""
        if not self.record_path.exists():
            return []
        return [json.loads(line) for line in self.record_path.read_text().splitlines()]


@asynccontextmanager
async def fake_llm(
    delay: float, workdir: Path, record: int = 4, kind: str = "openai"
) -> AsyncIterator[FakeLLM]:
    path = workdir / f"requests-{kind}.jsonl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.fake_llm", str(delay), str(path), str(record), kind,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdin is not None
    try:
        base_url = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        yield FakeLLM(proc, base_url, path)
    finally:
        proc.stdin.close()
        await proc.wait()


@dataclass
class GatewayProc:
    proc: asyncio.subprocess.Process
    port: int
    home: Path
    started_secs: float  # spawn → /ready answered 200
    log_lines: int = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


async def _drain(stream: asyncio.StreamReader, gw: GatewayProc) -> None:
    async for _ in stream:
        gw.log_lines += 1


@asynccontextmanager
async def gateway_process(
    config: dict[str, Any], home: Path | None = None, code: str | None = None
) -> AsyncIterator[GatewayProc]:
    """`picobot gateway` on `config`, ready (its /ready answered 200); the
    gateway of the checkout `code` if given, else of $BENCH_GATEWAY_CODE's,
    else this one's."""
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        where = home or Path(tmp)
        path = where / "config.json"
        path.write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
        env.update({"PICOBOT_HOME": str(where), "NO_PROXY": "127.0.0.1,localhost"})
        code = code or os.environ.get(OTHER_CODE)
        if code:  # another checkout's gateway, for a before/after in one run
            env["PYTHONPATH"] = code
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli", "gateway", "--config", str(path),
            env=env, cwd=code or None,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        try:
            port = await asyncio.wait_for(_port_from_log(proc.stderr), 60)
            await until_ready(port)
            gw = GatewayProc(proc, port, where, time.perf_counter() - t0)
            drain = asyncio.create_task(_drain(proc.stderr, gw), name="bench-log-drain")
            try:
                yield gw
            finally:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), 60)
                await drain
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _port_from_log(stderr: asyncio.StreamReader) -> int:
    async for raw in stderr:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if line.get("event") == "gateway_started":
            return int(line["port"])
    raise RuntimeError("the gateway exited before it started")


async def until_ready(port: int) -> None:
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(f"http://127.0.0.1:{port}/ready") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.005)
