"""The `memory_maintenance` internal event: keeps each user's memory small.

For every scope changed since the last run: a snapshot, one LLM call (the
default agent's provider and model, bounded by the provider's
`memory_maintenance_timeout_secs`) for a JSON plan (gateway.memory.plan),
the plan checked, then applied in one transaction — only if the scope did
not change meanwhile. A timeout, a provider error or an invalid plan changes
nothing for that scope and is logged; the other scopes go on, and the run
then fails so `picobot jobs show` says so. Then AGENT.md's summary block is
rewritten once. It runs on a scheduler worker: chat turns never wait for it.
"""

from __future__ import annotations

import asyncio

import structlog

from agent.messages import ChatMessage
from agent.providers.base import LLMProvider, LLMRequest, ProviderError
from gateway.memory.plan import PLAN_INSTRUCTIONS, InvalidPlan, check_plan, plan_request
from gateway.memory.service import SummaryFile
from gateway.spend.payer import Payer, paying
from storage.sql.memory.maintenance import Rewrite
from storage.sql.memory.memories import Scope
from storage.units.memories import MemoryStore

__all__ = ["MaintenanceFailed", "MemoryMaintenance"]

log = structlog.get_logger(__name__)


class MaintenanceFailed(Exception):
    """Some scopes could not be maintained (each is logged with its reason)."""


class MemoryMaintenance:
    def __init__(
        self,
        store: MemoryStore,
        summary_file: SummaryFile,
        provider: LLMProvider,
        model: str,
        *,
        timeout_secs: float,
        max_tokens: int | None = None,
    ) -> None:
        self.store = store
        self.summary_file = summary_file
        self.provider = provider
        self.model = model
        self.timeout_secs = timeout_secs
        self.max_tokens = max_tokens

    async def run(self, job_id: str | None = None) -> None:
        """One pass (the scheduler's `memory_maintenance` event, from `job_id`)."""
        scopes = await self.store.changed_scopes()
        failed: list[str] = []
        applied = 0
        for scope in scopes:
            bound = log.bind(scope_key=scope.key, job_id=job_id)
            try:
                if await self._maintain(scope):
                    applied += 1
            except (TimeoutError, ProviderError, InvalidPlan) as exc:
                reason = "timed out" if isinstance(exc, TimeoutError) else str(exc)
                bound.warning("memory_maintenance_skipped", reason=reason)
                failed.append(scope.key)
        if applied:
            await self.summary_file.refresh()
        log.info("memory_maintenance_done", scopes=len(scopes), applied=applied, failed=len(failed))
        if failed:
            raise MaintenanceFailed(f"{len(failed)} scope(s) not maintained; see the log")

    async def _maintain(self, scope: Scope) -> bool:
        snapshot = await self.store.snapshot(scope)
        if not snapshot.rows:
            rewrite = Rewrite()  # everything was deleted: no summary either
        else:
            request = LLMRequest(
                self.model,
                [ChatMessage.system(PLAN_INSTRUCTIONS), ChatMessage.user(plan_request(snapshot))],
                temperature=0,
                max_tokens=self.max_tokens,
            )
            async with asyncio.timeout(self.timeout_secs):
                with paying(_payer(scope)):
                    response = await self.provider.complete(request)
            rewrite = check_plan(response.content, snapshot)
        done = await self.store.apply(scope, snapshot.revision, rewrite)
        if not done:
            log.info("memory_maintenance_deferred", scope_key=scope.key, why="changed meanwhile")
        else:
            log.info(
                "memory_maintained",
                scope_key=scope.key,
                removed=len(rewrite.removals),
                written=len(rewrite.upserts),
            )
        return done


def _payer(scope: Scope) -> Payer:
    """The user whose memory it is pays for tidying it (budgets: gateway.spend);
    never refused, as a compaction is not."""
    channel, _, sender = scope.key.partition(":") if scope.kind == "user" else ("", "", "")
    return Payer(channel, "", sender, kind="memory", gated=False)
