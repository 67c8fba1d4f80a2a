"""The agent loop: provider call → tool calls → results → repeat, until a reply.

The loop owns no storage. Every assistant message that carries tool calls, and
every batch of tool results, is handed to the `TurnObserver` (which persists
it) before the next provider call, so the transcript is written in real order.
The final assistant message is returned, not observed: the caller persists it
together with the outbound reply in one transaction. What each request holds
around the history is `agent.context`'s business (`PreparedContext`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.context import PreparedContext, cut_tool_result
from agent.messages import CANCELLED_RESULT, ChatMessage, Role, ToolCall, pending_tool_calls
from agent.providers.base import LLMProvider, LLMRequest
from agent.tools.base import ToolCallWatcher, ToolContext, ToolRegistry
from agent.turn_control import APPROVAL_REFUSED, ApprovalRequired, TurnControl, TurnSteered

__all__ = ["AgentLoop", "LoopSettings", "TurnObserver", "TurnResult"]


class TurnObserver(ToolCallWatcher, Protocol):
    """Also told when each tool call starts and ends (`ToolCallWatcher`)."""

    async def on_messages(self, messages: Sequence[ChatMessage]) -> None:
        """Persist messages produced mid-turn (assistant tool calls, tool results)."""
        ...

    async def on_delta(self, text: str) -> None:
        """A streamed chunk of the reply in progress."""
        ...


@dataclass(frozen=True, slots=True)
class LoopSettings:
    model: str
    temperature: float | None = None
    max_tokens: int | None = None
    max_tool_iterations: int = 100
    tool_result_max_chars: int = 20_000
    stream: bool = False


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: ChatMessage
    tool_rounds: int


class AgentLoop:
    def __init__(self, provider: LLMProvider, tools: ToolRegistry, settings: LoopSettings) -> None:
        self.provider = provider
        self.tools = tools
        self.settings = settings

    async def run(
        self,
        history: list[ChatMessage],
        ctx: ToolContext,
        observer: TurnObserver,
        context: PreparedContext,
        *,
        control: TurnControl | None = None,
    ) -> TurnResult:
        """Run one turn on `history` (which ends with the new user message, or
        with the results of a batch a person answered).

        `history` is extended in place with the messages of this turn.
        `control` (agent.turn_control) may end it at a safe boundary:
        `ApprovalRequired` before a held batch runs, `TurnSteered` before a
        model call.
        """
        turn_start = next(
            (i for i in range(len(history) - 1, -1, -1) if history[i].role is Role.USER),
            len(history),
        )
        specs = self.tools.specs()
        s = self.settings
        on_delta = observer.on_delta if s.stream else None
        pending = pending_tool_calls(history)
        if pending:  # a resumed turn: calls left to run again (a crashed sub-agent)
            await self._batch(pending, history, ctx, observer)
        for round_ in range(s.max_tool_iterations + 1):
            if round_ and control is not None and control.steer_requested():
                raise TurnSteered(round_)
            request = LLMRequest(
                model=s.model,
                messages=context.messages(history, turn_start),
                tools=specs,
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                tail=context.tail,
                cache_key=context.cache_key,
            )
            response = await self.provider.complete(request, on_delta)
            assistant = ChatMessage(
                Role.ASSISTANT,
                response.content,
                tool_calls=response.tool_calls,
                reasoning_content=response.reasoning_content,
                usage=response.usage,
            )
            if not response.tool_calls:
                history.append(assistant)
                return TurnResult(assistant, round_)
            if round_ == s.max_tool_iterations:
                break
            history.append(assistant)
            await observer.on_messages([assistant])
            held = control.held(response.tool_calls, ctx) if control is not None else ()
            if held and control is not None and control.can_pause:
                raise ApprovalRequired(assistant, held)
            await self._batch(response.tool_calls, history, ctx, observer, refused=held)
        reply = ChatMessage(
            Role.ASSISTANT,
            f"I stopped after {s.max_tool_iterations} rounds of tool calls without reaching an "
            "answer. Tell me how to continue, or narrow the request.",
        )
        history.append(reply)
        return TurnResult(reply, s.max_tool_iterations)

    async def _batch(
        self,
        calls: Sequence[ToolCall],
        history: list[ChatMessage],
        ctx: ToolContext,
        observer: TurnObserver,
        *,
        refused: Sequence[ToolCall] = (),
    ) -> None:
        """Run one batch and store a result for every call, in call order: a
        call in `refused` (held for approval where nobody can be asked) gets
        `APPROVAL_REFUSED` instead of running; all get `[cancelled]` if the
        batch is cancelled."""
        skip = {id(c) for c in refused}
        try:
            results = iter(
                await self.tools.execute_batch(
                    [c for c in calls if id(c) not in skip], ctx, observer
                )
            )
        except asyncio.CancelledError:
            cancelled = [ChatMessage.tool_result(c, CANCELLED_RESULT) for c in calls]
            history.extend(cancelled)
            await observer.on_messages(cancelled)
            raise
        limit = self.settings.tool_result_max_chars
        messages = [
            ChatMessage.tool_result(
                c,
                APPROVAL_REFUSED
                if id(c) in skip
                else cut_tool_result(next(results).content, limit),
            )
            for c in calls
        ]
        history.extend(messages)
        await observer.on_messages(messages)
