"""The composition root: builds every part from the configuration and runs them
under one TaskGroup. The only module that imports and wires everything.

Every part is built here with its collaborators and hooks as constructor
arguments, then started in order as a `Service` on one `AsyncExitStack`
(gateway.lifecycle): storage → HTTP server → channels → outbound senders →
sessions → compaction → command lanes → inbound (recovery first) → scheduler
→ retention → ready. They stop in reverse order, also when one fails to start:
retention, scheduler → ingress off (bus closed) and inbound drained → running turns finish or are
checkpointed within `gateway.shutdown_timeout_secs` less its closing reserve →
outbox flushed → channels stopped (WebSocket clients closed with 1001) → MCP
servers → HTTP server down → traces flushed (when on) → storage closed last. Each stop is cut at the
budget's end (gateway.lifecycle.ShutdownBudget), whatever is connected.
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

from agent.prompt_file import AgentPromptFile
from agent.providers.base import LLMProvider
from agent.providers.deferred import DeferredProvider
from agent.tools.base import ToolServices
from channels.api.channel import ApiChannel
from channels.base import Channel
from channels.websocket import WebSocketChannel
from gateway.access.setup import AccessFeature
from gateway.approvals.service import Approvals
from gateway.bus import MessageBus
from gateway.clock import Clock, utc_now
from gateway.cluster.setup import ClusterFeature
from gateway.commands import CommandRegistry
from gateway.config.loading import LoadedConfig
from gateway.console.setup import ConsoleFeature
from gateway.delivery.setup import DeliveryFeature
from gateway.http import AppMount, HttpProbes, build_http_app
from gateway.i18n.locales import LocaleResolver
from gateway.ingress.setup import IngressFeature
from gateway.lifecycle import (
    Readiness,
    Service,
    ShutdownBudget,
    Stage,
    StartupError,
    root_task_group,
    start_services,
)
from gateway.memory.setup import build_memory
from gateway.ops.setup import OpsFeature
from gateway.scheduling import PipelineHost, TurnWaiters
from gateway.sessions.setup import SessionsFeature
from gateway.spend.setup import SpendFeature
from gateway.tools.setup import ToolsFeature
from gateway.turns.setup import TurnsFeature
from gateway.web.setup import WebFeature
from scheduler.admin import JobView
from scheduler.builtin import MEMORY_MAINTENANCE_EVENT
from scheduler.events import EventRegistry
from scheduler.service import Scheduler
from skills.runtime import SkillRuntime
from storage.backends import open_database
from storage.database import Database
from storage.store import Store

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from gateway.delivery.outbound import OutboundDispatcher
    from gateway.ingress.inbound import InboundProcessor
    from gateway.ops.retention import RetentionService
    from gateway.sessions.compaction import Compactor
    from gateway.sessions.manager import SessionManager

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
        self.channels: list[Channel] = [
            *DeliveryFeature.configured_channels(self.config),
            *extra_channels,
        ]
        self.commands = commands if commands is not None else CommandRegistry()
        self._providers_override = providers
        self.clock = clock
        self._access = AccessFeature.build(loaded.admins, self.config.channels.enabled())
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
        self.cluster: ClusterFeature | None = None  # several workers on one database
        self.console_routes: list[Any] = []  # the console API's, as mounted (tests)

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
        self.loaded.check_job_targets(names)  # ConfigError: what `picobot doctor` says too
        try:
            async with AsyncExitStack() as stack:
                db = await open_database(self.loaded.storage_url).open()
                stack.push_async_callback(db.close)  # closed last
                traces = await self.ops.start_tracing(self.loaded)  # None: tracing is off
                if traces is not None:  # flushed after the parts, within the budget
                    stack.push_async_callback(lambda: traces.stop(self.budget.left_to_close()))
                self.db = db
                providers = await self._providers(stack)
                services = await self._build(Store(db), providers)
                tg = await stack.enter_async_context(root_task_group())
                try:
                    await start_services(stack, tg, services, self.budget)
                except BaseException:
                    self.budget.begin()  # what started stops within the usual budget
                    raise
                self.started.set()
                log.info(
                    "gateway_started",
                    host=self.config.gateway.host,
                    port=self.port,
                    channels=names,
                    storage=db.describe,  # the password masked
                    home=str(self.loaded.home),
                    config=str(self.loaded.path or "(built-in defaults)"),
                    web_ui=self.web_ui_url,
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

    @property
    def web_ui_url(self) -> str:
        """Where a browser finds the web UI: `gateway.public_url`, else the bound
        address (a wildcard shown as the loopback address that reaches it)."""
        gateway = self.config.gateway
        if gateway.public_url:
            return gateway.public_url.rstrip("/") + "/"
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(
            gateway.host, gateway.host
        )
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    async def _providers(self, stack: AsyncExitStack) -> dict[str, LLMProvider]:
        built = dict(self._providers_override or TurnsFeature.providers(self.loaded))
        for deferred in built.values():  # each imports its SDK at its first call
            if isinstance(deferred, DeferredProvider):
                deferred.when_built(self.provider_loaded.set)
        providers: dict[str, LLMProvider] = {
            name: self.ops.metered(p, self.config) for name, p in built.items()
        }
        for provider in providers.values():
            stack.push_async_callback(provider.aclose)
        return providers

    async def _build(self, store: Store, providers: Mapping[str, LLMProvider]) -> list[Service]:
        """Every part, wired; returned in start order."""
        cfg = self.config
        self.store = store
        cluster = self.cluster = ClusterFeature.build(
            cfg, store, self.channels, lambda: f"{cfg.gateway.host}:{self.port}"
        )
        tools = await ToolsFeature.build(self.loaded, store, self.metrics)
        self.skills, self.mcp = tools.skills, tools.mcp
        tool_settings, registry = tools.settings, tools.registry
        by_name = {c.name: c for c in self.channels}
        events = EventRegistry()  # internal-event handlers, before the scheduler starts
        locales = LocaleResolver.from_config(cfg)
        # budgets' notices go through the outbox; the dispatcher's wake is bound later
        spend = SpendFeature.build(
            cfg, store, self.clock, lambda channel: self._wake(channel), locales.for_channel,
            self.metrics,
        )  # fmt: skip
        await spend.prepare()
        memory = build_memory(
            cfg,
            store.memories,
            providers,
            AgentPromptFile(self.loaded.agent_dir).path,
            charged=spend.charged,
        )
        events.register(MEMORY_MAINTENANCE_EVENT, lambda e: memory.maintenance.run(e.job_id))
        parts = [*tools.context_parts(), memory.part]
        turns = TurnsFeature.build(
            cfg, self.channels, providers, registry, parts, self.clock, spend.charged
        )
        agents = turns.agents
        delivery = DeliveryFeature.build(
            cfg,
            store,
            by_name,
            metrics=self.metrics,
            budget=self.budget,
            locale_of=locales.for_channel,
            media_dir=self.loaded.media_dir,
            gate=cluster.channels if cluster is not None else None,
        )
        dispatcher = self.dispatcher = delivery.dispatcher
        if cluster is not None:
            cluster.worker.subscribers.on_outbox.append(dispatcher.announced)
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
                worker=cluster.worker.id if cluster is not None else None,
            )
        self.scheduler = scheduler
        opener = await TurnsFeature.opener(
            store, self.loaded.agent_dir, locales.fallback, cfg.gateway.agent_prompt_reinject_every
        )
        conversations = SessionsFeature.build(store, opener.forget, dispatcher.wake)
        compactor = self.compactor = conversations.compactor
        approvals = Approvals(
            store, cfg.tools.approval.policy(), dispatcher, access=self.access, clock=self.clock
        )
        run_slots = TurnsFeature.run_slots(cfg)
        execution = turns.execution(
            cfg,
            store,
            dispatcher,
            tool_settings,
            opener=opener,
            services=ToolServices(
                scheduler=scheduler,
                admins=self.access,
                memory=memory.service,
                skills=self.skills,
                messenger=SessionsFeature.messenger(
                    store, dispatcher, by_name, opener.forget, self.clock
                ),
                subagents=ToolsFeature.subagents(
                    store, agents, run_slots, cfg.subagents, approvals
                ),
                files=delivery.file_sender(),
            ),
            after_turn=compactor.after_turn,
            turn_latency=self.metrics.turn_latency,
            channels=self.channels,
            clock=self.clock,
            approvals=approvals,
            is_admin=self.access.is_admin_message,
        )
        sessions = self.sessions = conversations.manager(
            execution,
            approvals,
            slots=run_slots,
            config=cfg.gateway,
            on_turn_done=waiters.turn_done,
            budget=self.budget,
        )
        session_commands = conversations.add_commands(
            store,
            sessions,
            self.commands,
            history_changed=opener.forget,
            approvals=approvals,
            agents=agents,
        )
        self._access.add_commands(
            store, self.commands, dispatcher.wake, self.clock, locales.for_channel
        )
        memory.add_commands(store.memories, self.commands)
        spend.add_commands(self.commands, self.access.is_admin_message)
        SessionsFeature.add_steering(approvals, sessions, self.commands)
        ingress = IngressFeature.build(
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
            limits=self.config.limits,
            budgets=spend.budgets,
            chat_leases=cluster.chats if cluster is not None else None,
            on_forwarded=waiters.handed_over,
        )
        processor = self.processor = ingress.processor

        app = self._http_app(store, delivery, scheduler, ingress)
        self.console_routes = ConsoleFeature(
            self.loaded, store, self.commands, self.access, approvals, self.channels,
            self._readiness.checks, dispatcher.wake, dispatcher.sending_problem,
            functools.partial(_job_views, store, cfg.time.zone), scheduler, self.mcp,
            self.skills, self.clock, budgets=spend.budgets, memory=memory,
            sessions=session_commands, sending_health=dispatcher.health, inbound=processor,
        ).mount(app)  # fmt: skip
        WebFeature(store, self.commands).mount(app, self.loaded.static_dir)  # last: every GET
        # Stopping last, the server gives requests still running the closing
        # reserve, not aiohttp's 60 s (the WebSocket channel has closed its own).
        runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=self.budget.reserve_secs
        )
        services: list[Service] = [
            Stage("http server", lambda tg: self._serve_http(runner), runner.cleanup),
            # registered before anything takes a lease; hands them over last at a stop
            *(cluster.services() if cluster is not None else []),
            *self._mcp_service(),  # stops after the turns that use it
            *(self._channel_service(c) for c in self.channels),
            dispatcher,  # after the channels: rows left from a previous run need them
            sessions,
            approvals,  # after the sessions: answered approvals go back into their queues
            compactor,
            processor.lanes,
            # releases messages kept over their rate; stops after ingress (open rows stay)
            *([ingress.later] if ingress.later is not None else []),
            *([ingress.handover] if ingress.handover is not None else []),
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
        self.retention = self.ops.retention(
            store, self.loaded.media_dir, cfg.storage, self.clock, cfg.limits.usage_retention_days
        )
        services.append(self.retention)  # last: its first pass runs once the gateway is up
        return services

    def _channel_service(self, channel: Channel) -> Service:
        alone = DeliveryFeature.service(channel)
        return alone if self.cluster is None else self.cluster.channel_service(channel, alone)

    def _mcp_service(self) -> list[Service]:
        """The MCP servers as a part whose stop takes what is left of the budget."""
        mcp = self.mcp
        if mcp is None:
            return []
        return [Stage(mcp.name, mcp.start, lambda: mcp.stop(self.budget.left_to_close()))]

    def _http_app(
        self,
        store: Store,
        delivery: DeliveryFeature,
        scheduler: Scheduler | None,
        ingress: IngressFeature,
    ) -> web.Application:
        """The HTTP app with each channel's routes mounted, and what /ready reads
        (the console and the web UI are mounted after it)."""
        app = build_http_app(
            HttpProbes(self.readiness, self._render_metrics, self._ready_details),
            self.config.served_hosts,
        )
        mount = AppMount(app)
        web_ui = WebFeature(store, self.commands)
        for channel in self.channels:
            if isinstance(channel, WebSocketChannel):
                locale = LocaleResolver.from_config(self.config).for_channel(channel.name)
                channel.use_directory(web_ui.directory(channel.name, locale))
                channel.use_owners(web_ui.owners(channel.name))
            if isinstance(channel, ApiChannel):
                channel.use_archive(web_ui.replies(channel.name))
                locale = LocaleResolver.from_config(self.config).for_channel(channel.name)
                channel.use_directory(web_ui.directory(channel.name, locale))
            delivery.connect(channel, self.bus, store, mount, ingress.dead_letters)
        self._readiness.add("storage", self._storage_state)
        for channel in self.channels:
            reason = delivery.not_ready_reason(channel)
            if self.cluster is not None:  # a channel another worker runs is fine
                reason = self.cluster.not_ready_reason(channel, reason)
            self._readiness.add(f"channel {channel.name}", reason)
        self._readiness.add("gateway", lambda: None if self.started.is_set() else "starting")
        if scheduler is not None:
            self._readiness.add(
                "scheduler",
                lambda: "not running" if self.started.is_set() and not scheduler.running else None,
            )
        return app

    async def _serve_http(self, runner: web.AppRunner) -> None:
        await runner.setup()
        site = web.TCPSite(runner, self.config.gateway.host, self.config.gateway.port)
        await site.start()
        self.port = runner.addresses[0][1]

    def _wake(self, channel: str) -> None:
        """New outbox rows for `channel`; before the dispatcher exists they wait for its first scan."""
        if self.dispatcher is not None:
            self.dispatcher.wake(channel)

    def _ready_details(self) -> dict[str, object]:
        details = ToolsFeature.mcp_details(self.mcp)
        if self.cluster is not None:
            details.update(self.cluster.details())
        return details

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
        ToolsFeature.mcp_metrics(self.mcp, self.metrics)
        if self.cluster is not None:
            self.metrics.set_worker_leases(self.cluster.lease_counts())
        if self.dispatcher is not None:
            for channel in self.channels:
                problem = self.dispatcher.sending_problem(channel.name)
                self.metrics.set_channel_send_degraded(channel.name, problem is not None)
        return self.metrics.render()


async def _job_views(store: Store, zone: tzinfo) -> list[dict[str, Any]]:
    return [JobView(job, last).to_dict(zone) for job, last in await store.scheduled_jobs()]
