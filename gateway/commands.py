"""Chat commands: a registry of handlers, run off the ingest path.

A command is an inbound message like any other: recorded in the inbox first,
answered through the outbox, its inbox row closed in the same commit as its
reply (`Store.answer`). Unknown `/words` are not commands; they go to the agent.

Commands run in `CommandLanes`, one lane per conversation, in the gateway's
TaskGroup, so a slow command (a big `/status`) never holds up the inbound
loop and so never delays another chat's ack. Within a conversation order is
kept: a message that arrives while that chat's commands are queued waits
behind them (so "/new" then "hello" puts "hello" in the new session).

A command is typed by its English name in every locale; its help and its
replies are catalogue texts (gateway.i18n) in the locale of the message that
ran it (`CommandCall.locale`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

import structlog

from gateway.bus import InboundMessage, OutboundMessage, reply_handle
from gateway.i18n import Locale, Msg, tr
from gateway.work import WorkItem
from storage.store import Store

__all__ = [
    "ANSWERED_ELSEWHERE",
    "Command",
    "CommandCall",
    "CommandLanes",
    "CommandRegistry",
]

log = structlog.get_logger(__name__)


class _AnsweredElsewhere:
    """A handler's result when another part answers the command when it is
    done (the compactor for /compact)."""


ANSWERED_ELSEWHERE: Final = _AnsweredElsewhere()

# What a handler returns: the reply text; None to close the command without a
# reply (/stop: the stopped turn says so itself); or ANSWERED_ELSEWHERE.
CommandReply = str | _AnsweredElsewhere | None


@dataclass(frozen=True, slots=True)
class CommandCall:
    item: WorkItem
    args: str

    @property
    def channel(self) -> str:
        return self.item.message.channel

    @property
    def chat_id(self) -> str:
        return self.item.message.chat_id

    @property
    def locale(self) -> Locale:
        return self.item.locale


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: Msg  # what /help says about it, in the asker's language
    handler: Callable[[CommandCall], Awaitable[CommandReply]]
    admin_only: bool = False  # for access control: only admins may run it
    # answered even for a sender without access (at most once an hour): /whoami
    open_to_all: bool = False


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def add(self, command: Command) -> None:
        if command.name in self._commands:
            raise ValueError(f"command /{command.name} registered twice")
        self._commands[command.name] = command

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def __contains__(self, name: str) -> bool:
        return name in self._commands

    def parse(self, text: str) -> tuple[Command, str] | None:
        """(command, args) for '/new title'; None when the text is no known command."""
        stripped = text.strip()
        if not stripped.startswith("/"):
            return None
        head, _, rest = stripped[1:].partition(" ")
        name = head.split("@", 1)[0].lower()  # Telegram appends @botname in groups
        command = self._commands.get(name)
        return (command, rest.strip()) if command is not None else None

    def help_text(self, locale: Locale) -> str:
        lines = [tr(locale, Msg.HELP_HEADER)]
        for c in self:
            line = tr(locale, Msg.HELP_LINE, name=c.name, help=tr(locale, c.help))
            lines.append(line + (tr(locale, Msg.HELP_ADMINS_ONLY) if c.admin_only else ""))
        return "\n".join(lines)


@dataclass(slots=True)
class _Lane:
    key: tuple[str, str]
    # (item, command and args); no command: a message to hand to its session
    steps: deque[tuple[WorkItem, tuple[Command, str] | None]] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None


Dispatch = Callable[[WorkItem], Awaitable[None]]
IsAdmin = Callable[[InboundMessage], bool]


class CommandLanes:
    def __init__(
        self,
        registry: CommandRegistry,
        store: Store,
        wake: Callable[[str], None],
        dispatch: Dispatch,
        *,
        max_queued: int = 20,
        is_admin: IsAdmin | None = None,
    ) -> None:
        """`dispatch` hands a plain message to its session (see InboundProcessor);
        `is_admin` (gateway.access.policy) decides `admin_only` commands: None, nobody may."""
        self.registry = registry
        self.store = store
        self.wake = wake
        self.dispatch = dispatch
        self.max_queued = max_queued
        self.is_admin = is_admin
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._tg: asyncio.TaskGroup | None = None
        self.ran = 0

    name = "command lanes"

    async def start(self, tg: asyncio.TaskGroup) -> None:
        self._tg = tg

    async def stop(self) -> None:
        """Wait for the queued steps (the inbound side is closed by then)."""
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        await asyncio.gather(*workers, return_exceptions=True)

    def busy(self, key: tuple[str, str]) -> bool:
        return key in self._lanes

    def queue(self, item: WorkItem, command: tuple[Command, str] | None) -> bool:
        """Queue a command (or a message behind one) for its conversation;
        False when that conversation already has `max_queued` steps waiting."""
        if self._tg is None:
            raise RuntimeError("CommandLanes.start() has not run")
        key = item.conversation
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(key)
        elif len(lane.steps) >= self.max_queued and not item.resume:
            return False
        lane.steps.append((item, command))
        if lane.worker is None:
            lane.worker = self._tg.create_task(self._work(lane), name=f"commands:{key[0]}:{key[1]}")
        return True

    async def _work(self, lane: _Lane) -> None:
        try:
            while lane.steps:
                item, command = lane.steps.popleft()
                try:
                    if command is None:
                        await self.dispatch(item)
                    else:
                        await self.run(item, *command)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # the row stays unfinished in the inbox and is retried at next start
                    log.exception("command_failed", channel=item.message.channel)
                finally:
                    if command is not None and item.trace is not None:
                        item.trace.done()  # its trace waits only for its reply now
        finally:
            lane.worker = None
            del self._lanes[lane.key]

    async def run(self, item: WorkItem, command: Command, args: str) -> None:
        """The one place `admin_only` is enforced: every command runs through here."""
        m = item.message
        if command.admin_only and (self.is_admin is None or not self.is_admin(m)):
            log.info(
                "command_refused",
                command=command.name,
                channel=m.channel,
                sender_id=m.sender_id,
                reason="admins only (gateway.admins, PICOBOT_ADMINS)",
            )
            await self.answer(item, tr(item.locale, Msg.ADMIN_ONLY, name=command.name))
            return
        log.info("command", command=command.name, channel=m.channel)
        reply = await command.handler(CommandCall(item, args))
        self.ran += 1
        if isinstance(reply, _AnsweredElsewhere):
            return
        await self.answer(item, reply)

    async def answer(self, item: WorkItem, text: str | None) -> None:
        """Close the command's inbox row with `text` as its reply (if any)."""
        m = item.message
        out = (
            OutboundMessage(
                m.channel,
                m.chat_id,
                text,
                reply_to_message_id=reply_handle(m),
                locale=item.locale.value,
            )
            if text
            else None
        )
        if out is not None and item.trace is not None:
            out = item.trace.stamp(out)
        await self.store.answer([item.inbox_id], out)
        if out is not None:
            self.wake(m.channel)
