"""Access control: the one policy that decides who the bot answers, on every channel.

Evaluated by the inbound processor after a message is durable and acknowledged
and before it is routed (gateway.access.gate), so a refused message costs no
LLM call. In order:

1. Turns the gateway asks for itself (scheduler, sub-agents) are not judged.
2. A group chat must be served (`channels.<name>.groups.allow`) and, when
   `groups.require_mention`, the message must address the bot; otherwise it is
   ignored, whoever sent it.
3. Admins (`gateway.admins` and PICOBOT_ADMINS, "channel:sender_id").
4. The channel's `allow_from` ("*" everyone).
5. Senders with an approved pairing (storage.sql.access.pairings).
6. Everyone else is refused.

This module is pure: it never touches storage. Whether a sender holds an
approved pairing is looked up by the caller and handed to `judge`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from channels.base import ChannelSettings
from gateway.bus import ChatType, InboundMessage, Origin

__all__ = ["AccessPolicy", "Reason", "Verdict", "sender_ids"]


class Reason(StrEnum):
    INTERNAL = "internal"  # not from a person in a chat
    ADMIN = "admin"
    ALLOW_FROM = "allow_from"
    PAIRED = "paired"
    GROUP_NOT_SERVED = "group_not_served"
    NOT_ADDRESSED = "not_addressed"  # a group message that does not address the bot
    UNKNOWN_SENDER = "unknown_sender"


_ADMITTED = frozenset({Reason.INTERNAL, Reason.ADMIN, Reason.ALLOW_FROM, Reason.PAIRED})
_CHAT_NOT_SERVED = frozenset({Reason.GROUP_NOT_SERVED, Reason.NOT_ADDRESSED})


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason
    admin: bool = False

    @property
    def admitted(self) -> bool:
        return self.reason in _ADMITTED

    @property
    def chat_served(self) -> bool:
        """False when the chat itself is not served (nobody there is answered)."""
        return self.reason not in _CHAT_NOT_SERVED


def _norm(sender: str) -> str:
    # Telegram usernames are case-insensitive; every other id is compared as written.
    return sender.lower() if sender.startswith("@") else sender


def sender_ids(message: InboundMessage) -> tuple[str, ...]:
    """The sender's id and the channel's other ids for the same person."""
    return tuple(_norm(s) for s in (message.sender_id, *message.sender_aliases) if s)


_DEFAULT = ChannelSettings()


class AccessPolicy:
    def __init__(self, admins: Iterable[str], channels: Mapping[str, ChannelSettings]) -> None:
        """`admins`: "channel:sender_id" entries; `channels`: each channel's settings
        (a channel without a section gets the defaults: everyone, groups need a mention)."""
        self._admins: frozenset[tuple[str, str]] = frozenset(
            (channel, _norm(sender))
            for channel, _, sender in (entry.partition(":") for entry in admins)
        )
        self._channels = dict(channels)

    def settings(self, channel: str) -> ChannelSettings:
        return self._channels.get(channel, _DEFAULT)

    def is_admin(self, channel: str, sender_id: str, aliases: Iterable[str] = ()) -> bool:
        """Whether this sender is an admin (the typed service tools may use)."""
        return any((channel, _norm(s)) in self._admins for s in (sender_id, *aliases) if s)

    def is_admin_message(self, message: InboundMessage) -> bool:
        return self.is_admin(message.channel, message.sender_id, message.sender_aliases)

    def _pre_pairing(self, message: InboundMessage) -> Verdict | None:
        """The verdict if it does not depend on pairings; None when it does."""
        if message.request.origin is not Origin.CHAT:
            return Verdict(Reason.INTERNAL)
        admin = self.is_admin_message(message)
        settings = self.settings(message.channel)
        if message.chat_type is ChatType.GROUP:
            groups = settings.groups
            if groups.allow != "*" and message.chat_id not in groups.allow:
                return Verdict(Reason.GROUP_NOT_SERVED, admin)
            if groups.require_mention and not message.addressed:
                return Verdict(Reason.NOT_ADDRESSED, admin)
        if admin:
            return Verdict(Reason.ADMIN, admin=True)
        allowed = {_norm(a) for a in settings.allow_from}
        if "*" in allowed or any(s in allowed for s in sender_ids(message)):
            return Verdict(Reason.ALLOW_FROM)
        return None

    def needs_pairing(self, message: InboundMessage) -> bool:
        """Whether `judge` needs to know if the sender holds an approved pairing."""
        return self._pre_pairing(message) is None

    def judge(self, message: InboundMessage, paired: bool = False) -> Verdict:
        verdict = self._pre_pairing(message)
        if verdict is not None:
            return verdict
        return Verdict(Reason.PAIRED if paired else Reason.UNKNOWN_SENDER)

    def why(self, message: InboundMessage, verdict: Verdict) -> str:
        """The reason for the log line, naming the config key to change."""
        key = f"channels.{message.channel}"
        match verdict.reason:
            case Reason.GROUP_NOT_SERVED:
                return f"group chat not in {key}.groups.allow"
            case Reason.NOT_ADDRESSED:
                return f"group message does not address the bot ({key}.groups.require_mention)"
            case Reason.UNKNOWN_SENDER:
                return f"sender is no admin, not in {key}.allow_from and not paired"
            case _:
                return f"admitted: {verdict.reason.value}"
