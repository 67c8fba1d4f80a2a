"""What one run of a job does, by kind: emit an event, send a message, run the agent.

`build_agent_message` is the contract with the gateway pipeline for agent
tasks: a synthetic `InboundMessage` whose id makes the gateway inbox dedup the
run durably, and whose `TurnRequest` says which agent answers, in which
session, and where the reply (or, for a silent task, a failure notice) goes.
"""

from __future__ import annotations

from datetime import datetime

from gateway.bus import Delivery, InboundMessage, Origin, SessionPolicy, TurnRequest
from scheduler.events import EventRegistry, InternalEvent
from scheduler.host import SchedulerHost
from scheduler.jobs import (
    AgentTaskJob,
    InternalEventJob,
    JobSpec,
    OutboundMessageJob,
    SilentAgentTaskJob,
)
from storage.sql.jobs import to_db_time

__all__ = ["build_agent_message", "execute_job", "run_message_id"]


def run_message_id(job_id: str, scheduled_at: datetime) -> str:
    return f"scheduler:{job_id}:{to_db_time(scheduled_at)}"


def build_agent_message(
    spec: AgentTaskJob | SilentAgentTaskJob,
    scheduled_at: datetime,
    now: datetime,
    max_run_tokens: int | None = None,
) -> InboundMessage:
    """The run as a message; `max_run_tokens` the scheduler's cap of a run
    (the job's `payload.max_tokens` wins)."""
    silent = isinstance(spec, SilentAgentTaskJob)
    payload = spec.payload
    request = TurnRequest(
        origin=Origin.SCHEDULER,
        agent=payload.agent,
        session=SessionPolicy.FRESH if payload.fresh_session else SessionPolicy.ACTIVE,
        delivery=Delivery.FAILURES_ONLY if silent else Delivery.REPLY,
        notify_chat_id=spec.target.chat_id if silent else None,
        system_prompt=payload.system_prompt,
        job_id=spec.id,
        max_tokens=payload.max_tokens or max_run_tokens,
    )
    return InboundMessage(
        channel=spec.target.channel,
        chat_id=spec.session_chat_id
        if isinstance(spec, SilentAgentTaskJob)
        else spec.target.chat_id,
        sender_id=payload.sender_id,
        text=payload.prompt,
        message_id=run_message_id(spec.id, scheduled_at),
        metadata=dict(payload.metadata),  # the job's own labels, for the record only
        request=request,
        received_at=now,
    )


async def execute_job(
    spec: JobSpec,
    scheduled_at: datetime,
    now: datetime,
    *,
    host: SchedulerHost,
    events: EventRegistry,
    max_run_tokens: int | None = None,
) -> None:
    """Run `spec` once; raises whatever the job's work raised."""
    match spec:
        case InternalEventJob():
            event = InternalEvent(
                spec.payload.event, spec.id, scheduled_at, spec.payload.arguments()
            )
            await events.emit(event)
        case OutboundMessageJob():
            await host.send_message(spec.target.channel, spec.target.chat_id, spec.payload.text)
        case AgentTaskJob() | SilentAgentTaskJob():
            message = build_agent_message(spec, scheduled_at, now, max_run_tokens)
            await host.run_agent_task(message)
