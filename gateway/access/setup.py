"""Access control's parts, built for the composition root: the policy (who is
an admin, who may talk in which chat), and the admin commands on it. The gate
that checks each inbound message is built with the processor
(gateway.ingress.setup), from this policy."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from channels.base import ChannelSettings
from gateway.access.commands import AccessCommands
from gateway.access.policy import AccessPolicy
from gateway.commands import CommandRegistry
from gateway.i18n import Locale
from storage.store import Store

__all__ = ["AccessFeature"]


@dataclass(frozen=True, slots=True)
class AccessFeature:
    policy: AccessPolicy

    @classmethod
    def build(cls, admins: Iterable[str], channels: Mapping[str, ChannelSettings]) -> AccessFeature:
        return cls(AccessPolicy(admins, channels))

    def add_commands(
        self,
        store: Store,
        registry: CommandRegistry,
        wake: Callable[[str], None],
        clock: Callable[[], datetime],
        locale_of: Callable[[str], Locale],
    ) -> None:
        """The admin commands on the policy, added to `registry`."""
        AccessCommands(self.policy, store, registry, wake, clock, locale_of)
