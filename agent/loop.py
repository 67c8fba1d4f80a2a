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
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson
import structlog

from agent.compaction import CompactionResult, estimate_tokens
from agent.context import PreparedContext, cut_tool_result
from agent.messages import (
    CANCELLED_RESULT,
    ChatMessage,
    Role,
    ToolCall,
    message_chars,
    pending_tool_calls,
)
from agent.providers.base import (
    DeltaSink,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    ProviderContextOverflow,
    ToolSpec,
)
from agent.spend import CostOf, SpendRefused, TurnSpend
from agent.tools.base import ToolCallWatcher, ToolContext, ToolRegistry, ToolResult
from agent.turn_control import APPROVAL_REFUSED, ApprovalRequired, TurnControl, TurnSteered
from agent.window import request_budget

__all__ = ["AgentLoop", "LoopSettings", "Rescue", "TurnObserver", "TurnResult"]

log = structlog.get_logger(__name__)

# Compacts a history that the provider refused as too long (agent.compaction.compact)
Rescue = Callable[[Sequence[ChatMessage]], Awaitable[CompactionResult | None]]


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
    context_window_tokens: int | None = None  # every request is fitted to it (agent.window)
    supports_vision: bool = True  # tool results may carry images (ToolContext.accepts_images)
    # rounds in a row of the same calls with the same results that end the turn; 0: never
    max_identical_tool_calls: int = 5
    # the turn's spend caps, checked before each model call after the first (a call
    # already made is not undone): tokens (input + output, every call) and the cost
    # `cost_of(model id, usage)` gives (None: the model has no prices); None: no cap
    max_turn_tokens: int | None = None
    max_turn_cost: float | None = None
    cost_of: CostOf | None = None

    def spend(self) -> TurnSpend:
        """A turn's spend under these caps (a sub-agent uses its parent's instead)."""
        return TurnSpend(self.max_turn_tokens, self.max_turn_cost, self.cost_of)


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: ChatMessage
    tool_rounds: int
    # made when the provider refused the request as too long; the caller commits it
    compaction: CompactionResult | None = None


@dataclass(slots=True)
class _Window:
    """What each request is built from: `[*prefix, *history[start:]]` within
    `budget` tokens. A compaction after an overflow moves it forward."""

    budget: int | None
    prefix: tuple[ChatMessage, ...] = ()
    start: int = 0
    compaction: CompactionResult | None = None
    rescued: bool = False
    known: tuple[int, int] | None = None  # (chars, of history[:n]) as the caller counted

    def known_chars(self, history: list[ChatMessage]) -> int | None:
        """At least the request history's size, counted only from where the caller stopped."""
        if self.known is None:
            return None
        chars, counted = self.known
        return chars + sum(message_chars(m) for m in history[counted:])

    def view(self, history: list[ChatMessage], turn_start: int) -> tuple[list[ChatMessage], int]:
        if not self.prefix:
            return history, turn_start
        return [*self.prefix, *history[self.start :]], len(self.prefix) + turn_start - self.start


_CONTINUE = "Tell me how to continue, or narrow the request."


class _Repeats:
    """Counts rounds in a row whose calls (tool, arguments) and results are
    the same: a model that keeps asking what it was just told is in a loop."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._last: tuple[tuple[str, str, str], ...] | None = None

    def seen(self, calls: Sequence[ToolCall], results: Sequence[ChatMessage]) -> bool:
        """Record one round (its calls and their results, in call order); True
        once `limit` rounds in a row were the same."""
        if not self.limit:
            return False
        signature = tuple(
            (call.name, _canonical(call.arguments), result.content)
            for call, result in zip(calls, results, strict=True)
        )
        self.count = self.count + 1 if signature == self._last else 1
        self._last = signature
        return self.count >= self.limit


def _canonical(arguments: str) -> str:
    """Arguments compared as JSON values (spacing and key order aside)."""
    try:
        return orjson.dumps(orjson.loads(arguments), option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONDecodeError, TypeError):  # not JSON, or nested past orjson's depth
        return arguments


def _result_message(result: ToolResult, limit: int) -> ChatMessage:
    return ChatMessage.tool_result(
        result.call, cut_tool_result(result.content, limit), result.media
    )


class AgentLoop:
    def __init__(
        self,
        provider: LLMProvider,
        tools: ToolRegistry,
        settings: LoopSettings,
        *,
        rescue: Rescue | None = None,
    ) -> None:
        """`rescue`: how to compact when the provider refuses a request as too
        long (then the call is retried once); without it the retry only trims."""
        self.provider = provider
        self.tools = tools
        self.settings = settings
        self.rescue = rescue

    async def run(
        self,
        history: list[ChatMessage],
        ctx: ToolContext,
        observer: TurnObserver,
        context: PreparedContext,
        *,
        control: TurnControl | None = None,
        history_chars: int | None = None,
    ) -> TurnResult:
        """Run one turn on `history` (which ends with the new user message, or
        with the results of a batch a person answered).

        `history` is extended in place with the messages of this turn.
        `control` (agent.turn_control) may end it at a safe boundary:
        `ApprovalRequired` before a held batch runs, `TurnSteered` before a
        model call. `history_chars`: at least its size now (`message_chars`),
        when the caller keeps it: fitting the requests then costs nothing per
        message.
        """
        turn_start = next(
            (i for i in range(len(history) - 1, -1, -1) if history[i].role is Role.USER),
            len(history),
        )
        specs = self.tools.specs()
        s = self.settings
        if ctx.accepts_images != s.supports_vision:
            ctx = dataclasses.replace(ctx, accepts_images=s.supports_vision)
        on_delta = observer.on_delta if s.stream else None
        window = _Window(
            request_budget(s.context_window_tokens, s.max_tokens, specs)
            if s.context_window_tokens
            else None,
            known=(history_chars, len(history)) if history_chars is not None else None,
        )
        pending = pending_tool_calls(history)
        if pending:  # a resumed turn: calls left to run again (a crashed sub-agent)
            await self._batch(pending, history, ctx, observer)
        repeats = _Repeats(s.max_tool_iterations and s.max_identical_tool_calls)
        if ctx.spend is None:  # a sub-agent's loop counts into its parent turn's
            ctx = dataclasses.replace(ctx, spend=s.spend())
        spend = ctx.spend
        assert spend is not None
        for round_ in range(s.max_tool_iterations + 1):
            if round_ and control is not None and control.steer_requested():
                raise TurnSteered(round_)
            try:
                response = await self._call(history, turn_start, context, specs, window, on_delta)
            except SpendRefused as refused:  # over a budget: no call was made
                log.info("turn_budget_stopped", rounds=round_)
                reply = ChatMessage(Role.ASSISTANT, refused.text)
                history.append(reply)
                return TurnResult(reply, round_, window.compaction)
            spend.add(response.model or s.model, response.usage)
            assistant = ChatMessage(
                Role.ASSISTANT,
                response.content,
                tool_calls=response.tool_calls,
                reasoning_content=response.reasoning_content,
                usage=response.usage,
            )
            if not response.tool_calls:
                history.append(assistant)
                return TurnResult(assistant, round_, window.compaction)
            if round_ == s.max_tool_iterations:
                break
            history.append(assistant)
            await observer.on_messages([assistant])
            held = control.held(response.tool_calls, ctx) if control is not None else ()
            if held and control is not None and control.can_pause:
                raise ApprovalRequired(assistant, held)
            await self._batch(response.tool_calls, history, ctx, observer, refused=held)
            if repeats.seen(response.tool_calls, history[-len(response.tool_calls) :]):
                names = sorted({c.name for c in response.tool_calls})
                log.warning("tool_loop_stopped", tools=names, rounds=repeats.count)
                reply = ChatMessage(
                    Role.ASSISTANT,
                    f"I stopped: I called {', '.join(names)} {repeats.count} times in a row "
                    "with the same arguments and got the same result each time, so I was going "
                    f"in circles. {_CONTINUE}",
                )
                history.append(reply)
                return TurnResult(reply, round_ + 1, window.compaction)
            if (over := spend.over()) is not None:
                log.warning("turn_spend_capped", cap=over, tokens=spend.tokens, cost=spend.cost)
                reply = ChatMessage(Role.ASSISTANT, f"I stopped: {over}. {_CONTINUE}")
                history.append(reply)
                return TurnResult(reply, round_ + 1, window.compaction)
        reply = ChatMessage(
            Role.ASSISTANT,
            f"I stopped after {s.max_tool_iterations} rounds of tool calls without reaching an "
            "answer. Tell me how to continue, or narrow the request.",
        )
        history.append(reply)
        return TurnResult(reply, s.max_tool_iterations, window.compaction)

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
            ChatMessage.tool_result(c, APPROVAL_REFUSED)
            if id(c) in skip
            else _result_message(next(results), limit)
            for c in calls
        ]
        history.extend(messages)
        await observer.on_messages(messages)

    async def _call(
        self,
        history: list[ChatMessage],
        turn_start: int,
        context: PreparedContext,
        specs: Sequence[ToolSpec],
        window: _Window,
        on_delta: DeltaSink | None,
    ) -> LLMResponse:
        """One provider call; a request refused as too long is compacted (or,
        failing that, trimmed to half) and sent once more, once per turn."""
        s = self.settings
        while True:
            messages, start = window.view(history, turn_start)
            request = LLMRequest(
                model=s.model,
                messages=context.messages(
                    messages, start, window.budget, window.known_chars(history)
                ),
                tools=specs,
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                tail=context.tail,
                cache_key=context.cache_key,
            )
            try:
                return await self.provider.complete(request, on_delta)
            except ProviderContextOverflow as exc:
                if window.rescued:
                    raise
                window.rescued = True
                sent = estimate_tokens(request.messages)
                log.warning("context_overflow", error=str(exc), estimate=sent)
                await self._shrink(history, window, sent)

    async def _shrink(self, history: list[ChatMessage], window: _Window, sent: int) -> None:
        result = await self.rescue(history) if self.rescue is not None else None
        if result is not None and result.shrunk:
            window.prefix = (*result.kept_system, result.summary)
            window.start = len(history) - len(result.recent)
            window.compaction = result
        else:  # nothing to fold: send half of what was refused
            window.budget = min(window.budget or sent, sent) // 2
