"""AccessGate: the access policy applied to inbound messages, and what a refusal does.

The inbound processor hands it each batch of newly recorded messages: one read
looks up the pairings of the senders the policy needs to know about, then every
message gets its verdict (gateway.access.policy). A refused message's inbox row is
closed here with `Store.answer`, so nothing stays unfinished and nothing reaches
the LLM. The sender gets at most one reply an hour (their id and how to get
access, or a pairing code: `channels.<name>.refusal`), counted in storage so
that a restart does not reset it; the log line says why. An admitted message
over its sender's rate (`limits.sender`, gateway.access.rate) or over a budget
(gateway.spend) is closed the same way, with a reply saying when to try again;
with `limits.over_rate` "later", one over the rate is kept instead
(gateway.access.later), with a note saying when it will be answered.
Chats the bot does not serve (a group not listed, a group message that does not
address the bot) get no reply at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import structlog

from channels.base import Refusal
from gateway.access.later import LaterMessages
from gateway.access.pairing import CODE_RULES, new_code
from gateway.access.policy import AccessPolicy, Reason, Verdict
from gateway.access.rate import OverRate, SenderRate
from gateway.bus import ChatType, InboundMessage, OutboundMessage, reply_handle
from gateway.i18n import Locale, Msg, tr
from gateway.spend.budget import Budgets
from gateway.spend.payer import Payer
from gateway.work import WorkItem
from storage.sql.access.pairings import CodeRules, IssueOutcome
from storage.sql.access.rate_events import RateLimit
from storage.store import Store

__all__ = ["AccessGate", "ReplyLimiter"]

log = structlog.get_logger(__name__)

REPLY_INTERVAL = timedelta(hours=1)
REFUSAL_REPLY_RATE = "refusal_reply"  # the rate_events kind


class ReplyLimiter:
    """At most one reply per sender per `interval`, counted in storage
    (storage.sql.access.rate_events): concurrent batches cannot both reply, and a restart
    does not reset it. Rows leave the table as the hour passes."""

    def __init__(self, store: Store, interval: timedelta) -> None:
        self.store = store
        self.limit = RateLimit(REFUSAL_REPLY_RATE, 1, interval)

    async def take(self, key: tuple[str, str], now: datetime) -> bool:
        return await self.store.rates.take(self.limit, [_key(key)], now) is None

    async def give_back(self, key: tuple[str, str], now: datetime) -> None:
        await self.store.rates.give_back(self.limit, [_key(key)], now)


def _key(sender: tuple[str, str]) -> str:
    return f"{sender[0]}:{sender[1]}"


def _who(message: InboundMessage) -> str:
    return f"{message.channel}:{message.sender_id}"


def explain_text(locale: Locale, message: InboundMessage, pairing: bool) -> str:
    group = pairing and message.chat_type is ChatType.GROUP
    ask = tr(locale, Msg.ASK_FOR_PAIRING_CODE if group else Msg.ASK_THE_ADMIN)
    return tr(locale, Msg.REFUSAL_EXPLAIN, who=_who(message), ask=ask)


def code_text(locale: Locale, code: str, rules: CodeRules) -> str:
    minutes = int(rules.ttl.total_seconds() // 60)
    return tr(locale, Msg.PAIRING_CODE, code=code, minutes=minutes)


class AccessGate:
    def __init__(
        self,
        policy: AccessPolicy,
        store: Store,
        wake: Callable[[str], None],
        clock: Callable[[], datetime],
        *,
        rules: CodeRules = CODE_RULES,
        reply_interval: timedelta = REPLY_INTERVAL,
        rate: SenderRate | None = None,
        budgets: Budgets | None = None,
        later: LaterMessages | None = None,
    ) -> None:
        self.policy = policy
        self.store = store
        self.wake = wake  # (channel): a reply is in the outbox
        self.clock = clock
        self.rules = rules
        self.limiter = ReplyLimiter(store, reply_interval)
        self.rate = rate  # limits.sender: None, no limit
        self.budgets = budgets  # limits' budgets (gateway.spend): None, none
        self.later = later  # limits.over_rate "later": where such messages wait

    async def judge(self, items: Sequence[WorkItem]) -> list[Verdict]:
        """A verdict per item; one storage read for the whole batch, if any."""
        policy = self.policy
        ask = [
            (i.message.channel, i.message.sender_id)
            for i in items
            if policy.needs_pairing(i.message)
        ]
        paired = await self.store.approved_senders(ask) if ask else set()
        return [
            policy.judge(i.message, (i.message.channel, i.message.sender_id) in paired)
            for i in items
        ]

    async def may_answer(self, message: InboundMessage, verdict: Verdict) -> bool:
        """Whether a refused sender's command open to everyone (/whoami) is run:
        always for an admin; else in a served chat, unless the channel is silent,
        once an hour like any other reply to them."""
        if verdict.admin:
            return True
        if not verdict.chat_served:
            return False
        if self.policy.settings(message.channel).refusal_mode is Refusal.SILENT:
            return False
        return await self.limiter.take((message.channel, message.sender_id), self.clock())

    async def over_limit(self, item: WorkItem, verdict: Verdict, *, again: bool = False) -> bool:
        """Whether an admitted message is over its sender's rate (limits.sender)
        or over a budget of its sender, chat or the deployment: then its inbox
        row is closed here with a reply saying which and when it frees up, and
        no turn runs; or, over the rate with `limits.over_rate` "later", it is
        kept to be answered then (gateway.access.later), with a reply saying
        so. `again`: a kept message coming back (no second reply). The caller
        leaves commands out."""
        m = item.message
        if self.rate is not None and await self._over_rate(item, verdict, again):
            return True
        if self.budgets is not None:
            payer = Payer(m.channel, m.chat_id, m.sender_id, verdict.admin, item.locale)
            spent = await self.budgets.check(payer)
            if spent is not None:
                await self._close(item, spent.text(item.locale))
                return True
        return False

    async def _over_rate(self, item: WorkItem, verdict: Verdict, again: bool) -> bool:
        assert self.rate is not None
        m, now, later = item.message, self.clock(), self.later
        behind = None if later is None or again else later.waiting((m.channel, m.sender_id))
        if behind is not None:  # in line behind the sender's earlier messages
            over: OverRate | None = OverRate(self.rate.limits[0], (behind - now).total_seconds())
        else:
            over = await self.rate.take(m, verdict.admin, now)
        if over is None:
            return False
        kept = later is not None and later.hold(
            item, verdict, now + timedelta(seconds=over.wait_secs)
        )
        log.info(
            "rate_limited",
            channel=m.channel,
            chat_id=m.chat_id,
            sender_id=m.sender_id,
            limit=over.limit.kind,
            wait_secs=round(over.wait_secs, 1),
            kept=kept,
        )
        if not kept:
            await self._close(item, over.text(item.locale))
        elif not again:  # the row stays open: answered when it falls due
            await self._note(item, over.text(item.locale, later=True))
        return True

    async def _note(self, item: WorkItem, text: str) -> None:
        m = item.message
        out = OutboundMessage(m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m))
        await self.store.enqueue(out)
        self.wake(m.channel)

    async def _close(self, item: WorkItem, text: str) -> None:
        m = item.message
        out = OutboundMessage(m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m))
        await self.store.answer([item.inbox_id], out)
        self.wake(m.channel)

    async def refuse(self, item: WorkItem, verdict: Verdict) -> None:
        """Close the refused item's inbox row, with a reply when one is due."""
        m = item.message
        why = self.policy.why(m, verdict)
        text = await self._reply_text(item, verdict) if verdict.chat_served else None
        level = log.debug if verdict.reason is Reason.NOT_ADDRESSED else log.info
        level(
            "access_refused",
            channel=m.channel,
            chat_id=m.chat_id,
            sender_id=m.sender_id,
            sender_aliases=list(m.sender_aliases),
            reason=why,
            replied=text is not None,
        )
        out = (
            OutboundMessage(m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m))
            if text is not None
            else None
        )
        await self.store.answer([item.inbox_id], out)
        if out is not None:
            self.wake(m.channel)

    async def _reply_text(self, item: WorkItem, verdict: Verdict) -> str | None:
        m, locale = item.message, item.locale
        settings = self.policy.settings(m.channel)
        mode = settings.refusal_mode
        key = (m.channel, m.sender_id)
        now = self.clock()
        if mode is Refusal.SILENT or not await self.limiter.take(key, now):
            return None
        if mode is not Refusal.PAIR or m.chat_type is not ChatType.DIRECT:
            return explain_text(locale, m, settings.pairing)
        issued = await self.store.issue_pairing_code(
            m.channel, m.sender_id, m.chat_id, new_code, now, self.rules
        )
        match issued.outcome:
            case IssueOutcome.ISSUED:
                assert issued.pairing is not None
                log.info("pairing_code_issued", channel=m.channel, sender_id=m.sender_id)
                return code_text(locale, issued.pairing.code, self.rules)
            case IssueOutcome.APPROVED:  # approved since this batch was judged
                return tr(locale, Msg.APPROVED_MEANWHILE)
            case IssueOutcome.FULL:
                # no reply; the sender may try again as soon as a code is free
                await self.limiter.give_back(key, now)
                log.info("pairing_codes_full", channel=m.channel, sender_id=m.sender_id)
                return None
            case IssueOutcome.TOO_SOON:
                return None
