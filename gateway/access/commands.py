"""The access-control chat commands: /whoami for everyone, /pair for admins.

/whoami tells a sender who they are to the bot (channel, id, admin or not,
access and pairing state), so an admin can add them; it is answered even for a
refused sender unless the channel's refusal is "silent" (gateway.access.gate).
/pair is `admin_only` (enforced by CommandLanes.run): list the pairings,
approve a code from any chat (the new user is told in their own chat), revoke.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from gateway.access.pairing import (
    approval_text,
    approved_notice,
    describe_pairing,
    pairing_state,
    parse_code,
    parse_who,
)
from gateway.access.policy import AccessPolicy, Reason
from gateway.bus import ChatType
from gateway.commands import Command, CommandCall, CommandRegistry, CommandReply
from gateway.i18n import Locale, Msg, tr
from storage.sql.access.pairings import ApproveOutcome, PairingState
from storage.store import Store

__all__ = ["AccessCommands"]

_ACCESS = {
    Reason.INTERNAL: Msg.ACCESS_INTERNAL,
    Reason.ADMIN: Msg.ACCESS_ADMIN,
    Reason.ALLOW_FROM: Msg.ACCESS_ALLOW_FROM,
    Reason.PAIRED: Msg.ACCESS_PAIRED,
    Reason.GROUP_NOT_SERVED: Msg.ACCESS_GROUP_NOT_SERVED,
    Reason.NOT_ADDRESSED: Msg.ACCESS_NOT_ADDRESSED,
    Reason.UNKNOWN_SENDER: Msg.ACCESS_UNKNOWN_SENDER,
}
_CHAT_TYPE = {ChatType.DIRECT: Msg.CHAT_DIRECT, ChatType.GROUP: Msg.CHAT_GROUP}


class AccessCommands:
    def __init__(
        self,
        policy: AccessPolicy,
        store: Store,
        registry: CommandRegistry,
        wake: Callable[[str], None],
        clock: Callable[[], datetime],
        locale_of: Callable[[str], Locale] = lambda channel: Locale.EN,
    ) -> None:
        """`locale_of(channel)`: the language of the approval notice a new user gets."""
        self.policy = policy
        self.approved_notice = approved_notice(locale_of)
        self.store = store
        self.wake = wake  # (channel): the approval notice is in the outbox
        self.clock = clock
        registry.add(
            Command(
                "whoami",
                Msg.HELP_WHOAMI,
                self.whoami,
                open_to_all=True,
            )
        )
        registry.add(
            Command(
                "pair",
                Msg.HELP_PAIR,
                self.pair,
                admin_only=True,
            )
        )

    async def whoami(self, call: CommandCall) -> CommandReply:
        m = call.item.message
        pairing = await self.store.pairing_of(m.channel, m.sender_id, self.clock())
        approved = pairing is not None and pairing.state is PairingState.APPROVED
        verdict = self.policy.judge(m, paired=approved)
        loc = call.locale
        lines = [
            tr(loc, Msg.WHOAMI_YOU, who=f"{m.channel}:{m.sender_id}"),
            tr(loc, Msg.WHOAMI_CHAT, chat=m.chat_id, kind=tr(loc, _CHAT_TYPE[m.chat_type])),
            tr(loc, Msg.WHOAMI_ADMIN, admin=tr(loc, Msg.YES if verdict.admin else Msg.NO)),
            tr(loc, Msg.WHOAMI_ACCESS, access=tr(loc, _ACCESS[verdict.reason])),
        ]
        if m.sender_aliases:
            lines.insert(1, tr(loc, Msg.WHOAMI_ALIASES, aliases=", ".join(m.sender_aliases)))
        if pairing is not None:
            lines.append(tr(loc, Msg.WHOAMI_PAIRING, state=pairing_state(pairing, loc)))
        return "\n".join(lines)

    async def pair(self, call: CommandCall) -> CommandReply:
        action, _, rest = call.args.partition(" ")
        action = action.lower() or "list"
        loc = call.locale
        if action == "list":
            found = await self.store.list_pairings(self.clock())
            if not found:
                return tr(loc, Msg.PAIR_NONE)
            lines = [describe_pairing(p, loc) for p in found]
            return "\n".join([tr(loc, Msg.PAIR_HEADER), *lines])
        if action == "approve":
            code = parse_code(rest)
            if code is None:
                return tr(loc, Msg.PAIR_APPROVE_USAGE)
            m = call.item.message
            result = await self.store.approve_pairing(
                code, f"{m.channel}:{m.sender_id}", self.clock(), self.approved_notice
            )
            if result.outcome is ApproveOutcome.APPROVED and result.pairing is not None:
                self.wake(result.pairing.channel)
            return approval_text(code, result, loc)
        if action == "revoke":
            who = parse_who(rest)
            if who is None:
                return tr(loc, Msg.PAIR_REVOKE_USAGE)
            changed = await self.store.revoke_pairing(*who, self.clock())
            name = f"{who[0]}:{who[1]}"
            return tr(loc, Msg.REVOKED if changed else Msg.NOTHING_TO_REVOKE, who=name)
        return tr(loc, Msg.PAIR_USAGE)
