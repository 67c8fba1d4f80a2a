"""The `scheduler_manage` tool: list, get, put, delete, pause and resume scheduled jobs.

It reaches the scheduler only through `ToolContext.services.scheduler` (the
`SchedulerService` protocol); it never imports the scheduler or storage. It
checks the arguments each action needs, fills a missing target with the
current chat, and turns the scheduler's `{"ok": False, "error"}` answers into
`ToolError`s so the model reads what was wrong.

Every request acts for the turn's sender (`ctx.channel`, `ctx.sender_id`),
never for an id the model wrote: the scheduler shows and changes only that
sender's own jobs, every job when the access policy says the sender is an admin.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

__all__ = ["SchedulerManageArgs", "SchedulerManageTool"]

_NEEDS_TARGET = {"outbound_message", "agent_task", "silent_agent_task"}
_AGENT_KINDS = {"agent_task", "silent_agent_task"}

_DESCRIPTION = """\
Your scheduled jobs. Actions: list; get, delete, pause, resume (job_id); put (job; \
same id replaces).
job: {id, kind: agent_task|silent_agent_task|outbound_message, schedule, target?: \
{channel, chat_id} (default this chat; others: admins only), payload}; it acts as you.
schedule: {type: delay|interval, seconds}, {type: at, at: ISO 8601} or {type: cron, \
expression: "30 18 * * *", timezone?}; delay and at run once.
payload: agent_task {prompt, system_prompt?, fresh_session?} replies to the target; \
silent_agent_task works apart, reporting only failures; outbound_message {text}."""


class SchedulerManageArgs(ToolArgs):
    action: Literal["list", "get", "put", "delete", "pause", "resume"]
    job_id: str | None = Field(None)
    job: dict[str, Any] | None = Field(None)


class SchedulerManageTool(Tool[SchedulerManageArgs]):
    name: ClassVar[str] = "scheduler_manage"
    description: ClassVar[str] = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = SchedulerManageArgs

    async def run(self, args: SchedulerManageArgs, ctx: ToolContext) -> str:
        scheduler = ctx.services.scheduler
        if scheduler is None:
            raise ToolError("the scheduler is not enabled on this gateway")
        payload: dict[str, Any] = {}
        if args.action == "put":
            payload["job"] = self._job_for_put(args, ctx)
        elif args.action != "list":
            if not args.job_id:
                raise ToolError(f"action {args.action!r} needs job_id")
            payload["job_id"] = args.job_id
        result = await scheduler.manage(
            args.action,
            payload,
            channel=ctx.channel,
            sender_id=ctx.sender_id,
            admin=_is_admin(ctx),
        )
        if not result.get("ok", False):
            raise ToolError(str(result.get("error") or "the scheduler refused the request"))
        return json.dumps(result, ensure_ascii=False, default=str)

    @staticmethod
    def _job_for_put(args: SchedulerManageArgs, ctx: ToolContext) -> dict[str, Any]:
        if args.job is None:
            raise ToolError("action 'put' needs job: the full job definition object")
        job = dict(args.job)
        if args.job_id is not None:
            if "id" in job and job["id"] != args.job_id:
                raise ToolError(
                    f"job_id {args.job_id!r} and job.id {job['id']!r} differ; give one id"
                )
            job["id"] = args.job_id
        if "id" not in job:
            raise ToolError('the job needs an id, e.g. "reminder.standup"')
        if job.get("kind") in _NEEDS_TARGET:
            target = job.get("target")
            if target is None:
                target = {}
            if not isinstance(target, dict):
                raise ToolError('target must be an object: {"channel": ..., "chat_id": ...}')
            target = dict(target)
            target.setdefault("channel", ctx.channel)
            if target["channel"] == ctx.channel:
                target.setdefault("chat_id", ctx.chat_id)
            job["target"] = target
            elsewhere = (target["channel"], target.get("chat_id")) != (ctx.channel, ctx.chat_id)
            # a silent task works in session_chat_id: another chat's session is another chat
            session_chat = target.get("session_chat_id")
            if session_chat is not None and session_chat != ctx.chat_id:
                elsewhere = True
            if elsewhere and not _is_admin(ctx):
                raise ToolError(
                    "only admins may schedule jobs for another chat; "
                    "leave target out to schedule for this one"
                )
        if job.get("kind") in _AGENT_KINDS:
            # a job acts as whoever made it: never as an id the model wrote
            # (that would lend it an admin's rights or another user's memories)
            payload = job.get("payload")
            if isinstance(payload, dict):
                job["payload"] = {**payload, "sender_id": ctx.sender_id}
        return job


def _is_admin(ctx: ToolContext) -> bool:
    admins = ctx.services.admins
    return admins is not None and admins.is_admin(ctx.channel, ctx.sender_id)
