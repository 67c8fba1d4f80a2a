"""The seam through which a person steers a running turn (`AgentLoop.run(control=)`).

Two checks, each at a safe boundary of the loop:
- `held(calls)`, after a batch's assistant message is stored and before any
  of its calls runs: the calls that must wait for a person's approval. If
  any, the loop raises `ApprovalRequired` and runs none of the batch.
- `steer_requested()`, before every model call after the first: a newer
  message wants to take over. The loop raises `TurnSteered`; the finished
  tool results are stored by then, and no batch is ever cut short.

A control that cannot pause (`can_pause` False: a sub-agent's, which has no
chat to ask in) still names the held calls: each gets `APPROVAL_REFUSED` as
its result instead of running, and the rest of the batch runs, so the
approval policy holds inside a sub-agent too.

The loop knows nothing about chats, storage or timeouts: the runtime
(gateway.approvals.service, gateway.sessions.manager, gateway.tools.subagents) implements this
protocol. A loop run without a control (a test's) never stops for either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.messages import ChatMessage, ToolCall
from agent.tools.base import ToolContext

__all__ = ["APPROVAL_REFUSED", "ApprovalRequired", "TurnControl", "TurnSteered"]

APPROVAL_REFUSED = (
    "[refused: this call needs a person's approval (tools.approval), and a sub-agent "
    "cannot ask for it; leave it to the main conversation, which can]"
)


class TurnControl(Protocol):
    @property
    def can_pause(self) -> bool:
        """False: held calls are refused with `APPROVAL_REFUSED`, not paused for."""
        ...

    def held(self, calls: Sequence[ToolCall], ctx: ToolContext) -> Sequence[ToolCall]:
        """The calls of this batch that need approval (empty: run the batch)."""
        ...

    def steer_requested(self) -> bool:
        """Whether the turn should end before its next model call."""
        ...


class ApprovalRequired(Exception):
    """The batch `assistant` asked for holds calls that need approval; none ran."""

    def __init__(self, assistant: ChatMessage, held: Sequence[ToolCall]) -> None:
        super().__init__(f"{len(held)} tool call(s) need approval")
        self.assistant = assistant
        self.held = tuple(held)


class TurnSteered(Exception):
    """The turn ended at a safe boundary for a newer message (steer)."""

    def __init__(self, rounds: int) -> None:
        super().__init__(f"steered after {rounds} tool round(s)")
        self.rounds = rounds
