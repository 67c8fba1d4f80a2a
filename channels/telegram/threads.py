"""Forum topics: which thread a reply, its parts and the chat actions go to.

In a forum supergroup every message of a topic carries its
`message_thread_id`, and a send without one lands in "General". The thread
travels inside the reply handle of the inbound message (`InboundMessage.reply_ref`
→ `OutboundMessage.reply_to_message_id` and `ChannelEvent.reply_to_message_id`),
so it is durable with the outbox row and needs no state of its own:

    "<chat id>:<message id>"            a message outside any topic
    "<chat id>:<message id>/<thread>"   a message in forum topic <thread>
"""

from __future__ import annotations

__all__ = ["make_handle", "parse_handle"]


def make_handle(chat_id: str, message_id: int, thread_id: int | None) -> str:
    handle = f"{chat_id}:{message_id}"
    return handle if thread_id is None else f"{handle}/{thread_id}"


def parse_handle(handle: str | None) -> tuple[int | None, int | None]:
    """(message id, thread id) of a reply handle; None where it has none."""
    if not handle:
        return None, None
    _, _, tail = handle.rpartition(":")
    raw_message, _, raw_thread = tail.partition("/")
    message_id = int(raw_message) if raw_message.isdigit() else None
    thread_id = int(raw_thread) if raw_thread.isdigit() else None
    return message_id, thread_id
