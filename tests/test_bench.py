"""`make bench` still runs: each scenario end to end at a tiny size. The
figures themselves are never asserted (DESIGN §10); only that every message
was answered and the results hang together."""

from __future__ import annotations

from bench import fanout, memory_search, sustained


async def test_sustained_scenario_answers_every_message_and_measures_the_ceiling() -> None:
    result = await sustained.run(clients=2, seconds=0.5, ceiling_secs=0.5)
    assert result["messages"] > 0
    assert result["answered_in_all"] >= result["messages"]
    assert result["gateway_cpu_ms_per_message"] > 0
    parts = result["event_loop_cpu_ms_per_message"] + result["other_threads_cpu_ms_per_message"]
    assert abs(parts - result["gateway_cpu_ms_per_message"]) < 0.01
    assert result["bare_websocket"]["messages_per_sec"] > 0


async def test_fanout_scenario_gets_a_reply_for_every_chat() -> None:
    result = await fanout.run(chats=5, llm_latency=0.1)
    assert result["replies"] == 5
    assert result["wall_secs_until_last_reply"] >= result["fastest_reply_secs"] >= 0.1


async def test_memory_search_scenario_times_every_search() -> None:
    result = await memory_search.run(memories=200, rounds=2)
    assert result["searches"] == 16
    assert result["p50_ms"] > 0
