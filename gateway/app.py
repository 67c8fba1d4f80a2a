"""The composition root: builds every part from the configuration and runs them
under one TaskGroup. The only module that imports and wires everything.

Start-up: storage → channels' routes → HTTP server → senders, recovery,
processor → channels start → ready. Shutdown (request_stop, SIGTERM): ingress
off (bus closed) → inbound drained → running turns finish or are checkpointed
within `gateway.shutdown_timeout_secs` → outbox flushed → channels stopped →
HTTP server down → storage closed last.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web

from agent.loop import LoopSettings
from agent.prompt_file import AgentPromptFile
from agent.providers import create_provider
from agent.providers.base import LLMProvider, ProviderSettings
from agent.tools.base import ToolRegistry, ToolSettings
from agent.tools.builtin import build_registry
from agent.tools.scheduler_manage import SchedulerManageTool
from channels.base import Channel, ChannelSettings, HttpMount, StateStore
from gateway.bus import MessageBus
from gateway.channel_registry import build_channels
from gateway.commands import CommandHandler
from gateway.config import Config, LoadedConfig
from gateway.context import Compactor
from gateway.execution import AgentProfile, ExecutionService
from gateway.http import AppMount, HttpProbes, build_http_app
from gateway.inbound import InboundProcessor
from gateway.logging import register_secrets
from gateway.metered import MeteredProvider
from gateway.metrics import Metrics
from gateway.outbound import OutboundDispatcher, RetryPolicy
from gateway.scheduling import PipelineHost, TurnWaiters
from gateway.sessions import SessionManager
from gateway.turns import TurnOpener
from scheduler.service import Scheduler
from storage import channel_state, outbox
from storage.db import Database

__all__ = ["Gateway"]

log = structlog.get_logger(__name__)


class _DbState:
    """StateStore for one channel on the channel_state table."""

    def __init__(self, db: Database, channel: str) -> None:
        self._db = db
        self._channel = channel

    async def get(self, key: str) -> str | None:
        return await self._db.read(lambda c: channel_state.get_state(c, self._channel, key))

    async def set(self, key: str, value: str) -> None:
        await self._db.write(lambda c: channel_state.set_state(c, self._channel, key, value))


@dataclass(slots=True)
class _Runtime:
    """The ChannelRuntime handed to one channel."""

    bus: MessageBus
    state: StateStore
    http: HttpMount
    media_dir: Path
    channel: str
    dispatcher: OutboundDispatcher | None = None

    def recipient_online(self, chat_id: str) -> None:
        if self.dispatcher is not None:
            self.dispatcher.recipient_online(self.channel, chat_id)

    def register_secret(self, value: str) -> None:
        register_secrets([value])


def build_providers(loaded: LoadedConfig) -> dict[str, LLMProvider]:
    providers: dict[str, LLMProvider] = {}
    for name, p in loaded.config.providers.items():
        settings = ProviderSettings(
            name=name,
            api_key=p.api_key.get_secret_value(),
            base_url=p.base_url,
            extra_headers=dict(p.extra_headers),
            timeout_secs=p.llm_timeout_secs,
            max_retries=p.max_retries,
            retry_max_wait_secs=p.retry_max_wait_secs,
            api_key_hint=loaded.missing_env.get(f"providers.{name}.api_key"),
        )
        providers[name] = create_provider(p.type, settings)
    return providers


def build_profile(
    config: Config,
    agent_name: str,
    providers: Mapping[str, LLMProvider],
    registry: ToolRegistry,
    settings: ChannelSettings | None,
    *,
    stream: bool,
) -> AgentProfile:
    agent = config.agents[agent_name]
    model = config.models[agent.model]
    tools = registry
    if settings is not None:
        tools = registry.narrowed(settings.tools.allow, settings.tools.deny)
    loop = LoopSettings(
        model=model.model_id,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        max_tool_iterations=agent.max_tool_iterations,
        tool_result_max_chars=agent.tool_result_max_chars,
        context_tool_result_trim_chars=agent.context_tool_result_trim_chars,
        stream=stream,
        system_prompt=agent.system_prompt,
    )
    summary = config.models[agent.compaction.summary_model or agent.model]
    return AgentProfile(
        agent_name,
        providers[agent.provider],
        loop,
        tools,
        model.supports_vision,
        context_window_tokens=model.context_window_tokens,
        compaction=agent.compaction,
        summary_model=summary.model_id,
        summary_timeout_secs=config.providers[agent.provider].llm_timeout_secs,
    )


class Gateway:
    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        extra_channels: Sequence[Channel] = (),
        providers: Mapping[str, LLMProvider] | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.bus = MessageBus(self.config.gateway.inbound_queue_capacity)
        self.metrics = Metrics()
        self.channels: list[Channel] = [*build_channels(self.config), *extra_channels]
        self._providers_override = providers
        self._stop = asyncio.Event()
        self.started = asyncio.Event()
        self.port: int | None = None
        self.db: Database | None = None
        self.sessions: SessionManager | None = None
        self.dispatcher: OutboundDispatcher | None = None
        self.processor: InboundProcessor | None = None
        self.compactor: Compactor | None = None
        self.scheduler: Scheduler | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.config.gateway.host}:{self.port}"

    def request_stop(self) -> None:
        self._stop.set()

    def readiness(self) -> list[str]:
        reasons = [f"channel {c.name}: {c.not_ready_reason}" for c in self.channels if not c.ready]
        if self.db is None:
            reasons.append("storage: not open")
        if not self.started.is_set():
            reasons.append("gateway: starting")
        elif self.scheduler is not None and not self.scheduler.running:
            reasons.append("scheduler: not running")
        return reasons

    async def run(self) -> None:
        cfg = self.config
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ValueError(f"two channels share a name: {names}")
        async with AsyncExitStack() as stack:
            db = await Database(self.loaded.storage_path).open()
            stack.push_async_callback(db.close)  # closed last
            self.db = db
            built = dict(self._providers_override or build_providers(self.loaded))
            providers: dict[str, LLMProvider] = {
                name: MeteredProvider(p, self.metrics) for name, p in built.items()
            }
            for provider in providers.values():
                stack.push_async_callback(provider.aclose)
            workspace = self.loaded.workspace
            workspace.mkdir(parents=True, exist_ok=True)
            tool_settings = ToolSettings(
                workspace=workspace,
                restrict_to_workspace=cfg.tools.restrict_to_workspace,
                read_max_bytes=cfg.tools.read_max_bytes,
                exec_timeout_secs=cfg.tools.exec_timeout_secs,
                exec_output_max_chars=cfg.tools.exec_output_max_chars,
                http_timeout_secs=cfg.tools.http.timeout_secs,
                http_max_bytes=cfg.tools.http.max_response_bytes,
                http_allow_private=cfg.tools.http.allow_private,
            )
            registry = build_registry(
                tool_settings,
                cfg.time.timezone,
                cfg.tools.disabled,
                cfg.tools.timeout_secs,
                other_known=["scheduler_manage"],
            )
            if cfg.scheduler.enabled and "scheduler_manage" not in cfg.tools.disabled:
                registry.register(SchedulerManageTool())
            enabled = cfg.channels.enabled()
            profiles = {
                c.name: build_profile(
                    cfg,
                    enabled[c.name].agent if c.name in enabled else "default",
                    providers,
                    registry,
                    enabled.get(c.name),
                    stream=c.capabilities.can_stream,
                )
                for c in self.channels
            }
            dispatcher = OutboundDispatcher(
                db,
                {c.name: c for c in self.channels},
                RetryPolicy(
                    cfg.gateway.outbound_max_attempts,
                    cfg.gateway.outbound_retry_base_secs,
                    cfg.gateway.outbound_retry_max_secs,
                ),
                send_timeout_secs=cfg.gateway.send_timeout_secs,
                rescan_secs=cfg.gateway.outbox_rescan_secs,
                metrics=self.metrics,
            )
            self.dispatcher = dispatcher
            prompt_file = AgentPromptFile(self.loaded.agent_dir)
            await prompt_file.ensure()
            execution = ExecutionService(
                db,
                dispatcher,
                profiles,
                tool_settings,
                opener=TurnOpener(db, prompt_file, cfg.gateway.agent_prompt_reinject_every),
                typing_delay_secs=cfg.gateway.typing_delay_secs,
            )
            execution.turn_latency = self.metrics.turn_latency
            sessions = SessionManager(
                execution,
                max_concurrent_runs=cfg.gateway.max_concurrent_runs,
                queue_mode=cfg.gateway.queue_mode,
                max_pending=cfg.gateway.max_pending_per_session,
            )
            self.sessions = sessions
            waiters = TurnWaiters()
            sessions.on_turn_done = waiters.turn_done
            scheduler: Scheduler | None = None
            if cfg.scheduler.enabled:
                scheduler = Scheduler(
                    cfg.scheduler,
                    db,
                    PipelineHost(self.bus, dispatcher, waiters),
                    default_zone=cfg.time.zone,
                    on_run_status=self.metrics.scheduler_run,
                )
                execution.scheduler = scheduler
            self.scheduler = scheduler
            compactor = Compactor(db, sessions, dispatcher.wake)
            self.compactor = compactor
            execution.after_turn = compactor.after_turn
            commands = CommandHandler(db, sessions, dispatcher.wake)
            commands.compact_hook = lambda item, sid: compactor.request(
                item, sid, profiles[item.message.channel]
            )
            commands.status_hook = lambda stats, ch: Compactor.status_line(stats, profiles[ch])
            processor = InboundProcessor(self.bus, db, sessions, commands)
            processor.on_accepted = self.metrics.inbound
            self.processor = processor

            app = build_http_app(HttpProbes(self.readiness, self._render_metrics))
            mount = AppMount(app)
            media_dir = self.loaded.media_dir
            for channel in self.channels:
                channel.setup(
                    _Runtime(
                        self.bus,
                        _DbState(db, channel.name),
                        mount,
                        media_dir,
                        channel.name,
                        dispatcher,
                    )
                )
            runner = web.AppRunner(app, handle_signals=False, access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            site = web.TCPSite(runner, cfg.gateway.host, cfg.gateway.port)
            await site.start()
            self.port = runner.addresses[0][1]

            async with asyncio.TaskGroup() as tg:
                sessions.attach(tg)
                for channel in self.channels:
                    await self._start_channel(channel)  # before senders: recovered rows need it
                services = dispatcher.start(tg)
                services.append(tg.create_task(compactor.run(), name="compactor"))
                await processor.recover()
                services.append(tg.create_task(processor.run(), name="inbound-processor"))
                if scheduler is not None:
                    await scheduler.start()
                self.started.set()
                log.info("gateway_started", host=cfg.gateway.host, port=self.port, channels=names)
                await self._stop.wait()
                await self._shutdown()
                for task in services:  # the long-running loops are all that is left
                    task.cancel()
            log.info("gateway_stopped")

    @staticmethod
    async def _start_channel(channel: Channel) -> None:
        """A channel that fails to start is reported not ready; the others run."""
        try:
            await channel.start()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("channel_start_failed", target=channel.name)
            channel.not_ready_reason = f"failed to start: {type(exc).__name__}"

    async def _shutdown(self) -> None:
        assert self.sessions is not None
        assert self.dispatcher is not None
        deadline = time.monotonic() + self.config.gateway.shutdown_timeout_secs
        log.info("gateway_stopping")
        if self.scheduler is not None:
            await self.scheduler.stop(
                grace_secs=min(5.0, self.config.gateway.shutdown_timeout_secs / 3)
            )
        self.bus.close()
        try:
            async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                await self.bus.inbound.join()
        except TimeoutError:
            log.warning("shutdown_inbound_not_drained", queued=self.bus.inbound.qsize())
        await self.sessions.shutdown(max(0.1, deadline - time.monotonic()))
        flushed = await self.dispatcher.flush(max(1.0, deadline - time.monotonic()))
        if not flushed:
            log.warning("shutdown_outbox_not_flushed")
        for channel in self.channels:
            try:
                await channel.stop()
            except Exception:
                log.exception("channel_stop_failed", target=channel.name)

    async def _render_metrics(self) -> tuple[bytes, str]:
        if self.db is not None:
            counts = await self.db.read(outbox.outbox_counts)
            self.metrics.set_outbox(
                counts.get("pending", 0), counts.get("failed", 0), counts.get("parked", 0)
            )
        if self.sessions is not None:
            self.metrics.set_active_sessions(self.sessions.active_conversations)
            self.metrics.set_queue_depth("inbound", self.bus.inbound.qsize())
            self.metrics.set_queue_depth("session_pending", self.sessions.pending_messages)
        for channel in self.channels:
            self.metrics.set_channel_ready(channel.name, channel.ready)
        return self.metrics.render()
