"""Operations' parts for the composition root: the metrics every part reports
to, the metering wrapper around each provider, and the retention service."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent.providers.base import LLMProvider
from gateway.clock import Clock
from gateway.config.core import Config, StorageConfig
from gateway.config.loading import LoadedConfig
from gateway.ops import tracing
from gateway.ops.metered import MeteredProvider
from gateway.ops.metrics import Metrics
from gateway.ops.retention import RetentionService, RetentionSettings
from gateway.ops.tracing import Tracing
from storage.store import Store

__all__ = ["OpsFeature"]


@dataclass(frozen=True, slots=True)
class OpsFeature:
    metrics: Metrics = field(default_factory=Metrics)

    def metered(self, provider: LLMProvider, config: Config | None = None) -> MeteredProvider:
        """Its kind (`providers.<name>.type`) is named in traces."""
        known = config.providers.get(provider.name) if config is not None else None
        return MeteredProvider(provider, self.metrics, known.type if known else provider.name)

    @staticmethod
    async def start_tracing(loaded: LoadedConfig) -> Tracing | None:
        """The OpenTelemetry SDK, installed when tracing is on (gateway.ops.tracing)."""
        return await tracing.start(loaded.config.observability, loaded.otel_env)

    def retention(
        self,
        store: Store,
        media_dir: Path,
        storage: StorageConfig,
        clock: Clock,
        usage_retention_days: float = 400.0,
    ) -> RetentionService:
        settings = RetentionSettings.of(storage, usage_retention_days)
        return RetentionService(store, media_dir, settings, clock=clock)
