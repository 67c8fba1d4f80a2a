"""`SchedulerHost`: what the scheduler needs from the gateway.

Its own module so that `scheduler.runner` and `scheduler.service` both name it
without importing each other. Imports `gateway.bus` only.
"""

from __future__ import annotations

from typing import Protocol

from gateway.bus import InboundMessage

__all__ = ["SchedulerHost"]


class SchedulerHost(Protocol):
    """What the scheduler needs from the gateway (implemented by the composition root)."""

    async def send_message(self, channel: str, chat_id: str, text: str) -> None:
        """Queue `text` for `chat_id` durably (an outbox row) and return;
        NoSuchChannel if `channel` is not enabled."""
        ...

    async def notify_failure(self, channel: str, chat_id: str, job_id: str) -> None:
        """Queue the notice that silent task `job_id` failed (it timed out) for
        `chat_id`, durably, in the chat's language; never the internal error."""
        ...

    async def run_agent_task(self, message: InboundMessage) -> None:
        """Run a synthetic message through the pipeline; return when its turn has finished.

        Raises NoSuchChannel if `message.channel` is not enabled, and
        raises if the turn failed; for a silent task (`Delivery.FAILURES_ONLY`)
        the pipeline has sent the failure notice to `request.notify_chat_id` by then.
        """
        ...
