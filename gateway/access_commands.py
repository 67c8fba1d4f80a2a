"""The access-control chat commands: /whoami for everyone, /pair for admins.

/whoami tells a sender who they are to the bot (channel, id, admin or not,
access and pairing state), so an admin can add them; it is answered even for a
refused sender unless the channel's refusal is "silent" (gateway.access_gate).
/pair is `admin_only` (enforced by CommandLanes.run): list the pairings,
approve a code from any chat (the new user is told in their own chat), revoke.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from gateway.access import AccessPolicy, Reason
from gateway.commands import Command, CommandCall, CommandRegistry, CommandReply
from gateway.pairing import (
    APPROVED_NOTICE,
    approval_text,
    describe_pairing,
    pairing_state,
    parse_code,
    parse_who,
)
from storage.pairings import ApproveOutcome, PairingState
from storage.store import Store

__all__ = ["AccessCommands"]

_ACCESS = {
    Reason.INTERNAL: "yes",
    Reason.ADMIN: "yes (admin)",
    Reason.ALLOW_FROM: "yes (allow_from)",
    Reason.PAIRED: "yes (paired)",
    Reason.GROUP_NOT_SERVED: "no: this group is not served",
    Reason.NOT_ADDRESSED: "only when you mention me in this group",
    Reason.UNKNOWN_SENDER: "no: ask an admin to add you",
}

PAIR_USAGE = "Usage: /pair list | /pair approve CODE | /pair revoke CHANNEL:SENDER_ID"


class AccessCommands:
    def __init__(
        self,
        policy: AccessPolicy,
        store: Store,
        registry: CommandRegistry,
        wake: Callable[[str], None],
        clock: Callable[[], datetime],
    ) -> None:
        self.policy = policy
        self.store = store
        self.wake = wake  # (channel): the approval notice is in the outbox
        self.clock = clock
        registry.add(
            Command(
                "whoami",
                "your id here, whether you are an admin, your access",
                self.whoami,
                open_to_all=True,
            )
        )
        registry.add(
            Command(
                "pair",
                "/pair list | approve CODE | revoke CHANNEL:ID: let people in",
                self.pair,
                admin_only=True,
            )
        )

    async def whoami(self, call: CommandCall) -> CommandReply:
        m = call.item.message
        pairing = await self.store.pairing_of(m.channel, m.sender_id, self.clock())
        approved = pairing is not None and pairing.state is PairingState.APPROVED
        verdict = self.policy.judge(m, paired=approved)
        lines = [
            f"You are {m.channel}:{m.sender_id}",
            f"Chat: {m.chat_id} ({m.chat_type.value})",
            f"Admin: {'yes' if verdict.admin else 'no'}",
            f"Access: {_ACCESS[verdict.reason]}",
        ]
        if m.sender_aliases:
            lines.insert(1, "Also known as: " + ", ".join(m.sender_aliases))
        if pairing is not None:
            lines.append("Pairing: " + pairing_state(pairing))
        return "\n".join(lines)

    async def pair(self, call: CommandCall) -> CommandReply:
        action, _, rest = call.args.partition(" ")
        action = action.lower() or "list"
        if action == "list":
            found = await self.store.list_pairings(self.clock())
            if not found:
                return "No pairings and no pending codes."
            return "Pairings:\n" + "\n".join(describe_pairing(p) for p in found)
        if action == "approve":
            code = parse_code(rest)
            if code is None:
                return "Usage: /pair approve CODE (the XXXX-XXXX code the new user was given)."
            m = call.item.message
            result = await self.store.approve_pairing(
                code, f"{m.channel}:{m.sender_id}", self.clock(), APPROVED_NOTICE
            )
            if result.outcome is ApproveOutcome.APPROVED and result.pairing is not None:
                self.wake(result.pairing.channel)
            return approval_text(code, result)
        if action == "revoke":
            who = parse_who(rest)
            if who is None:
                return "Usage: /pair revoke CHANNEL:SENDER_ID (as /pair list shows it)."
            changed = await self.store.revoke_pairing(*who, self.clock())
            name = f"{who[0]}:{who[1]}"
            return f"Revoked {name}." if changed else f"{name} has no pairing to revoke."
        return PAIR_USAGE
