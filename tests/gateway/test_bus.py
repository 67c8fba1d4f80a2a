"""MessageBus: bounded, with receipts, and closed for real."""

from __future__ import annotations

import asyncio

import pytest

from gateway.bus import ApprovalAsk, BusClosed, InboundMessage, MessageBus, OutboundMessage, Receipt


def _message(n: int) -> InboundMessage:
    return InboundMessage("c", f"chat-{n}", "u", f"text {n}", f"m{n}")


async def _accept(bus: MessageBus, count: int) -> list[str]:
    taken = []
    for _ in range(count):
        message = await bus.get()
        assert message is not None
        assert message.receipt is not None
        message.receipt.set_result(Receipt.ACCEPTED)
        taken.append(message.message_id)
    return taken


async def test_submit_waits_for_room_and_for_the_receipt() -> None:
    bus = MessageBus(inbound_capacity=2)
    submits = [asyncio.create_task(bus.submit(_message(n))) for n in range(3)]
    await asyncio.sleep(0)
    assert bus.depth == 2  # the third waits for room
    assert await _accept(bus, 3) == ["m0", "m1", "m2"]
    assert await asyncio.gather(*submits) == [Receipt.ACCEPTED] * 3


async def test_close_drains_what_was_queued_then_ends_every_consumer() -> None:
    bus = MessageBus(inbound_capacity=4)
    first = asyncio.create_task(bus.submit(_message(1)))
    await asyncio.sleep(0)
    bus.close()
    with pytest.raises(BusClosed):
        await bus.submit(_message(2))
    assert bus.depth == 1
    assert await _accept(bus, 1) == ["m1"]
    assert await first is Receipt.ACCEPTED
    assert await bus.get() is None
    assert await bus.get() is None  # a second consumer ends too
    assert bus.get_nowait() is None
    assert bus.depth == 0


async def test_a_submit_waiting_for_room_is_refused_when_the_bus_closes() -> None:
    bus = MessageBus(inbound_capacity=1)
    queued = asyncio.create_task(bus.submit(_message(1)))
    waiting = asyncio.create_task(bus.submit(_message(2)))
    await asyncio.sleep(0)
    bus.close()
    assert await _accept(bus, 1) == ["m1"]  # makes room: the waiter wakes to a closed bus
    with pytest.raises(BusClosed):
        await waiting
    assert await queued is Receipt.ACCEPTED
    assert await bus.get() is None


def test_an_approval_ask_carries_its_button_labels_through_the_outbox() -> None:
    ask = ApprovalAsk(3, ("bash",), group=True, approve_label="批准", deny_label="拒绝")
    assert ApprovalAsk.of(OutboundMessage("c", "chat", "t", metadata=ask.metadata())) == ask


def test_an_approval_ask_queued_without_labels_reads_as_english() -> None:
    metadata = {"approval": {"id": 3, "tools": ["bash"], "group": False}}  # an older row
    ask = ApprovalAsk.of(OutboundMessage("c", "chat", "t", metadata=metadata))
    assert ask is not None
    assert (ask.approve_label, ask.deny_label) == ("Approve", "Deny")
