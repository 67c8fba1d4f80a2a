"""The composition root: builds every part from the configuration and runs them
under one TaskGroup. The only module that imports and wires everything.

Every part is built here with its collaborators and hooks as constructor
arguments, then started in order as a `Service` on one `AsyncExitStack`
(gateway.lifecycle): storage → HTTP server → channels → outbound senders →
sessions → compaction → command lanes → inbound (recovery first) → scheduler
→ retention → ready. They stop in reverse order, also when one fails to start:
retention, scheduler → ingress off (bus closed) and inbound drained → running turns finish or are
checkpointed within `gateway.shutdown_timeout_secs` → outbox flushed →
channels stopped → HTTP server down → storage closed last.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from agent.context import ContextPart
from agent.mcp.status import McpStatusPart
from agent.prompt_file import DEFAULT_AGENT_PROMPTS, AgentPromptFile
from agent.providers.base import LLMProvider
from agent.providers.deferred import DeferredProvider
from agent.subagents.types import TASK_TOOL
from agent.tools.base import ToolServices
from agent.tools.task import TaskTool
from channels.base import Channel
from channels.websocket import WebSocketChannel
from gateway.access.setup import build_access
from gateway.approvals.service import Approvals, TurnControls
from gateway.bus import MessageBus
from gateway.clock import Clock, utc_now
from gateway.commands import CommandRegistry
from gateway.config.core import LoadedConfig
from gateway.delivery.files import OutboxFileSender
from gateway.delivery.outbound import OutboundDispatcher
from gateway.delivery.policy import RetryPolicy
from gateway.delivery.registry import build_channels
from gateway.delivery.runtime import (
    ChannelState,
    GatewayChannelRuntime,
    channel_service,
    not_ready_reason,
)
from gateway.http import AppMount, HttpProbes, build_http_app
from gateway.i18n.locales import LocaleResolver
from gateway.ingress.setup import IngressFeature, build_ingress
from gateway.lifecycle import (
    Readiness,
    Service,
    ShutdownBudget,
    Stage,
    StartupError,
    start_services,
)
from gateway.memory.setup import build_memory
from gateway.ops.setup import OpsFeature
from gateway.scheduling import PipelineHost, TurnWaiters
from gateway.sessions.commands import SessionCommands
from gateway.sessions.compaction import Compactor
from gateway.sessions.manager import ConversationGates, SessionManager
from gateway.sessions.messages import OutboxMessenger
from gateway.sessions.steering import ApprovalCommands
from gateway.sessions.usage import usage_status
from gateway.tools.mcp import mcp_details, mcp_metrics
from gateway.tools.setup import build_tools
from gateway.tools.skills import SkillIndexPart, build_skill_runtime, skill_tool_kit
from gateway.tools.subagents import SubagentRunner, build_catalog
from gateway.turns.agents import AgentDirectory, AgentProfile, build_profile, build_providers
from gateway.turns.chat_policy import build_chat_policies
from gateway.turns.execution import ExecutionService
from gateway.turns.opener import TurnOpener
from gateway.turns.run_slots import RunSlots
from gateway.web.setup import WebFeature
from scheduler.admin import JobView
from scheduler.builtin import MEMORY_MAINTENANCE_EVENT
from scheduler.events import EventRegistry
from scheduler.service import Scheduler
from skills.runtime import SkillRuntime
from storage.sqlite.db import Database
from storage.store import Store

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from gateway.ingress.inbound import InboundProcessor
    from gateway.ops.retention import RetentionService

__all__ = ["Gateway"]

log = structlog.get_logger(__name__)


class Gateway:
    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        extra_channels: Sequence[Channel] = (),
        providers: Mapping[str, LLMProvider] | None = None,
        commands: CommandRegistry | None = None,
        clock: Clock = utc_now,
    ) -> None:
        """`commands`: a registry to add the built-in commands to (an embedding
        program's own commands first); a fresh one by default. `clock`: the
        wall clock that session resets go by and pairing codes are issued and
        expire by (tests move it)."""
        self.loaded = loaded
        self.config = loaded.config
        self.bus = MessageBus(self.config.gateway.inbound_queue_capacity)
        self.ops = OpsFeature()
        self.metrics = self.ops.metrics
        self.channels: list[Channel] = [*build_channels(self.config), *extra_channels]
        self.commands = commands if commands is not None else CommandRegistry()
        self._providers_override = providers
        self.clock = clock
        self._access = build_access(loaded.admins, self.config.channels.enabled())
        self.access = self._access.policy
        self._stop = asyncio.Event()
        self.started = asyncio.Event()
        self.provider_loaded = asyncio.Event()  # a provider's SDK imported, its client built
        self._readiness = Readiness()
        self.budget = ShutdownBudget(self.config.gateway.shutdown_timeout_secs)
        self.port: int | None = None
        self.db: Database | None = None
        self.store: Store | None = None
        self.sessions: SessionManager | None = None
        self.dispatcher: OutboundDispatcher | None = None
        self.processor: InboundProcessor | None = None
        self.compactor: Compactor | None = None
        self.scheduler: Scheduler | None = None
        self.mcp: McpManager | None = None
        self.skills: SkillRuntime | None = None
        self.retention: RetentionService | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.config.gateway.host}:{self.port}"

    def request_stop(self) -> None:
        self._stop.set()

    def _storage_state(self) -> str | None:
        if self.db is None:
            return "not open"
        failure = self.db.write_failure
        return None if failure is None else f"writes failing: {failure}"

    def readiness(self) -> list[str]:
        """Why the gateway is not ready (what /ready reports); empty when it is."""
        return self._readiness.reasons()

    async def run(self) -> None:
        """Run until `request_stop`; raises `StartupError` if a part fails to start."""
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ValueError(f"two channels share a name: {names}")
        try:
            async with AsyncExitStack() as stack:
                db = await Database(self.loaded.storage_path).open()
                stack.push_async_callback(db.close)  # closed last
                self.db = db
                providers = await self._providers(stack)
                services = await self._build(Store(db), providers)
                tg = await stack.enter_async_context(asyncio.TaskGroup())
                try:
                    await start_services(stack, tg, services)
                except BaseException:
                    self.budget.begin()  # what started stops within the usual budget
                    raise
                self.started.set()
                log.info(
                    "gateway_started", host=self.config.gateway.host, port=self.port, channels=names
                )
                await self._stop.wait()
                log.info("gateway_stopping")
                self.budget.begin()
        except ExceptionGroup as group:  # the TaskGroup wraps what its body raised
            failed = [e for e in group.exceptions if isinstance(e, StartupError)]
            if failed:
                raise failed[0] from None
            raise
        log.info("gateway_stopped")

    async def _providers(self, stack: AsyncExitStack) -> dict[str, LLMProvider]:
        built = dict(self._providers_override or build_providers(self.loaded))
        for deferred in built.values():  # each imports its SDK at its first call
            if isinstance(deferred, DeferredProvider):
                deferred.when_built(self.provider_loaded.set)
        providers: dict[str, LLMProvider] = {name: self.ops.metered(p) for name, p in built.items()}
        for provider in providers.values():
            stack.push_async_callback(provider.aclose)
        return providers

    async def _build(self, store: Store, providers: Mapping[str, LLMProvider]) -> list[Service]:
        """Every part, wired; returned in start order."""
        cfg = self.config
        self.store = store
        self.skills = build_skill_runtime(self.loaded, store)
        if self.skills is not None:
            await self.skills.current()  # the first scan: invalid files are logged at start-up
        tool_settings, registry, self.mcp = build_tools(
            self.loaded, skill_tool_kit(self.skills), self.metrics
        )
        catalog = await build_catalog(self.loaded, registry.names())
        if TASK_TOOL not in cfg.tools.disabled:
            registry.register(TaskTool(catalog))
        enabled = cfg.channels.enabled()
        by_name = {c.name: c for c in self.channels}
        events = EventRegistry()  # internal-event handlers, before the scheduler starts
        memory = build_memory(
            cfg, store.memories, providers, AgentPromptFile(self.loaded.agent_dir).path
        )
        events.register(MEMORY_MAINTENANCE_EVENT, lambda e: memory.maintenance.run(e.job_id))
        parts: list[ContextPart] = [SkillIndexPart(self.skills)] if self.skills else []
        parts += [McpStatusPart(self.mcp)] if self.mcp is not None else []
        parts.append(memory.part)

        def profile(agent: str, channel: str) -> AgentProfile:
            return build_profile(
                cfg,
                agent,
                providers,
                registry,
                enabled.get(channel),
                stream=by_name[channel].capabilities.can_stream,
                parts=parts,
            )

        agents = AgentDirectory(
            {
                c.name: enabled[c.name].agent if c.name in enabled else "default"
                for c in self.channels
            },
            frozenset(cfg.agents),
            profile,
        )
        locales = LocaleResolver.from_config(cfg)
        dispatcher = OutboundDispatcher(
            store,
            by_name,
            RetryPolicy(
                base_secs=cfg.gateway.outbound_retry_base_secs,
                max_secs=cfg.gateway.outbound_retry_max_secs,
                give_up_after_secs=cfg.gateway.outbound_give_up_after_secs,
                stale_notice_secs=cfg.gateway.outbound_stale_notice_secs,
            ),
            send_timeout_secs=cfg.gateway.send_timeout_secs,
            rescan_secs=cfg.gateway.outbox_rescan_secs,
            metrics=self.metrics,
            budget=self.budget,
            locale_of=locales.for_channel,
        )
        self.dispatcher = dispatcher
        waiters = TurnWaiters()
        scheduler: Scheduler | None = None
        if cfg.scheduler.enabled:
            scheduler = Scheduler(
                cfg.scheduler,
                store.db,
                PipelineHost(self.bus, dispatcher, waiters, locales.for_channel),
                events=events,
                default_zone=cfg.time.zone,
                on_run_status=self.metrics.scheduler_run,
            )
        self.scheduler = scheduler
        # a missing AGENT.md is written in the gateway's language (`picobot init` writes one too)
        prompt_file = AgentPromptFile(
            self.loaded.agent_dir, DEFAULT_AGENT_PROMPTS[locales.fallback.value]
        )
        await prompt_file.ensure()
        opener = TurnOpener(store, prompt_file, cfg.gateway.agent_prompt_reinject_every)
        gates = ConversationGates()
        compactor = Compactor(store, gates, opener.forget, dispatcher.wake)
        self.compactor = compactor
        approvals = Approvals(
            store, cfg.tools.approval.policy(), dispatcher, access=self.access, clock=self.clock
        )
        # turns and their sub-agents share one cap (gateway.turns.run_slots)
        run_slots = RunSlots(cfg.gateway.max_concurrent_runs, cfg.subagents.max_concurrent)
        execution = ExecutionService(
            store,
            dispatcher,
            agents,
            tool_settings,
            opener=opener,
            services=ToolServices(
                scheduler=scheduler,
                admins=self.access,
                memory=memory.service,
                skills=self.skills,
                messenger=OutboxMessenger(
                    store, dispatcher, by_name, opener.forget, clock=self.clock
                ),
                subagents=SubagentRunner(
                    store,
                    agents,
                    slots=run_slots,
                    slot_wait_secs=cfg.subagents.slot_wait_secs,
                    default_max_execution_secs=cfg.subagents.default_max_execution_secs,
                    control=TurnControls(approvals, can_pause=False),
                ),
                files=OutboxFileSender(dispatcher, by_name, self.loaded.media_dir),
            ),
            after_turn=compactor.after_turn,
            turn_latency=self.metrics.turn_latency,
            typing_delay_secs=cfg.gateway.typing_delay_secs,
            chat_policies=build_chat_policies(cfg, self.channels),
            clock=self.clock,
            approvals=approvals,
        )
        sessions = SessionManager(
            execution,
            gates,
            slots=run_slots,
            queue_mode=cfg.gateway.queue_mode,
            max_pending=cfg.gateway.max_pending_per_session,
            on_turn_done=waiters.turn_done,
            budget=self.budget,
        )
        self.sessions = sessions
        approvals.dispatch = lambda item: sessions.dispatch(item, force=True)
        SessionCommands(
            store,
            sessions,
            self.commands,
            history_changed=opener.forget,
            waiting_approval=approvals.has_open,
            compact=lambda item, sid: compactor.request(
                item, sid, agents.resolve(item.message.channel)
            ),
            status_line=lambda stats, ch, loc: Compactor.status_line(
                stats, agents.resolve(ch), loc
            ),
            usage_line=lambda stats, ch, loc: usage_status(stats, agents.resolve(ch), loc),
        )
        self._access.add_commands(
            store, self.commands, dispatcher.wake, self.clock, locales.for_channel
        )
        memory.add_commands(store.memories, self.commands)
        ApprovalCommands(approvals, sessions, self.commands)
        ingress = build_ingress(
            self.bus,
            store,
            sessions,
            self.commands,
            dispatcher.wake,
            metrics=self.metrics,
            budget=self.budget,
            policy=self.access,
            clock=self.clock,
            locales=locales,
        )
        processor = self.processor = ingress.processor

        app = self._http_app(store, dispatcher, scheduler, ingress)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        services: list[Service] = [
            Stage("http server", lambda tg: self._serve_http(runner), runner.cleanup),
            *([self.mcp] if self.mcp is not None else []),  # stops after the turns that use it
            *(channel_service(c) for c in self.channels),
            dispatcher,  # after the channels: rows left from a previous run need them
            sessions,
            approvals,  # after the sessions: answered approvals go back into their queues
            compactor,
            processor.lanes,
            processor,  # recovery, then ingress
        ]
        if scheduler is not None:
            grace = min(5.0, cfg.gateway.shutdown_timeout_secs / 3)
            services.append(
                Stage(
                    "scheduler",
                    lambda tg: scheduler.start(),
                    lambda: scheduler.stop(grace_secs=grace),
                )
            )
        self.retention = self.ops.retention(store, self.loaded.media_dir, cfg.storage, self.clock)
        services.append(self.retention)  # last: its first pass runs once the gateway is up
        return services

    def _http_app(
        self,
        store: Store,
        dispatcher: OutboundDispatcher,
        scheduler: Scheduler | None,
        ingress: IngressFeature,
    ) -> web.Application:
        """The HTTP app with each channel's routes mounted, and what /ready reads."""
        app = build_http_app(
            HttpProbes(self.readiness, self._render_metrics, lambda: mcp_details(self.mcp)),
            self.config.served_hosts,
        )
        mount = AppMount(app)
        web_ui = WebFeature(store, self.commands)
        for channel in self.channels:
            if isinstance(channel, WebSocketChannel):
                locale = LocaleResolver.from_config(self.config).for_channel(channel.name)
                channel.use_directory(web_ui.directory(channel.name, locale))
                channel.use_owners(web_ui.owners(channel.name))
            channel.setup(
                GatewayChannelRuntime(
                    self.bus,
                    ChannelState(store, channel.name),
                    mount,
                    self.loaded.media_dir,
                    channel.name,
                    dispatcher,
                    ingress.dead_letters,
                )
            )
        self._readiness.add("storage", self._storage_state)
        for channel in self.channels:
            self._readiness.add(f"channel {channel.name}", not_ready_reason(channel, dispatcher))
        self._readiness.add("gateway", lambda: None if self.started.is_set() else "starting")
        if scheduler is not None:
            self._readiness.add(
                "scheduler",
                lambda: "not running" if self.started.is_set() and not scheduler.running else None,
            )
        web_ui.mount(
            app,
            self.config,
            self._readiness.checks,
            dispatcher.wake,
            functools.partial(_job_views, store, self.config.time.zone),
            self.loaded.static_dir,
        )
        return app

    async def _serve_http(self, runner: web.AppRunner) -> None:
        await runner.setup()
        site = web.TCPSite(runner, self.config.gateway.host, self.config.gateway.port)
        await site.start()
        self.port = runner.addresses[0][1]

    async def _render_metrics(self) -> tuple[bytes, str]:
        if self.store is not None:
            counts = await self.store.unsent_counts()
            self.metrics.set_outbox(
                counts.get("pending", 0), counts.get("failed", 0), counts.get("parked", 0)
            )
        if self.sessions is not None:
            self.metrics.set_active_sessions(self.sessions.active_conversations)
            self.metrics.set_queue_depth("inbound", self.bus.depth)
            self.metrics.set_queue_depth("session_pending", self.sessions.pending_messages)
        for channel in self.channels:
            self.metrics.set_channel_ready(channel.name, channel.ready)
        mcp_metrics(self.mcp, self.metrics)
        if self.dispatcher is not None:
            for channel in self.channels:
                problem = self.dispatcher.sending_problem(channel.name)
                self.metrics.set_channel_send_degraded(channel.name, problem is not None)
        return self.metrics.render()


async def _job_views(store: Store, zone: tzinfo) -> list[dict[str, Any]]:
    return [JobView(job, last).to_dict(zone) for job, last in await store.scheduled_jobs()]
