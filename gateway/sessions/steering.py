"""/approve, /deny and /steer: a person's say over a running agent (docs/approvals.md).

/approve [N] and /deny [N] [reason] answer the chat's newest request, or #N
(the buttons send the number). They answer with nothing when taken: the
turn that carries on from the approval writes the chat's next reply.
/steer TEXT sends TEXT as a message that ends the running turn at its next
safe boundary, in any `gateway.queue_mode`.
"""

from __future__ import annotations

import dataclasses

from gateway.approvals.service import Approvals
from gateway.bus import Decision
from gateway.commands import ANSWERED_ELSEWHERE, Command, CommandCall, CommandRegistry, CommandReply
from gateway.i18n import Msg, tr
from gateway.sessions.manager import SessionManager

__all__ = ["ApprovalCommands"]


class ApprovalCommands:
    def __init__(
        self, approvals: Approvals | None, sessions: SessionManager, registry: CommandRegistry
    ) -> None:
        self.approvals = approvals
        self.sessions = sessions
        registry.add(Command("approve", Msg.HELP_APPROVE, self.approve))
        registry.add(Command("deny", Msg.HELP_DENY, self.deny))
        registry.add(Command("steer", Msg.HELP_STEER, self.steer))

    async def approve(self, call: CommandCall) -> CommandReply:
        return await self._answer(call, Decision.APPROVE)

    async def deny(self, call: CommandCall) -> CommandReply:
        return await self._answer(call, Decision.DENY)

    async def _answer(self, call: CommandCall, decision: Decision) -> CommandReply:
        if self.approvals is None:
            return tr(call.locale, Msg.TOOL_APPROVAL_NONE)
        return await self.approvals.answer(call.item.message, decision, call.args, call.locale)

    async def steer(self, call: CommandCall) -> CommandReply:
        if not call.args:
            return tr(call.locale, Msg.STEER_USAGE)
        item = call.item
        steering = dataclasses.replace(
            item, message=dataclasses.replace(item.message, text=call.args)
        )
        if not self.sessions.steer(steering):
            return tr(call.locale, Msg.MESSAGES_QUEUED, count=self.sessions.max_pending)
        return ANSWERED_ELSEWHERE  # its inbox row closes with the turn that takes it
