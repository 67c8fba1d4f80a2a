"""AGENT.md: the persistent agent persona file and the rule for injecting it.

The file lives in the agent directory (`~/.picobot/agent/AGENT.md` by default;
the directory is passed in). It is created with default content when missing
(English or Chinese, `DEFAULT_AGENT_PROMPTS`: `picobot init --locale` writes
one, else the gateway writes the one of its locale) and read fresh at every
injection, so an edit takes effect at the next injection without a restart. Reads happen on a worker thread, never on the
event loop.

When to inject is a pure function of the active history and the session's
user-turn counters (`needs_injection`); this module never touches storage.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from agent.memory.summary_block import strip_block
from agent.messages import ChatMessage, Marker

__all__ = [
    "AGENT_PROMPT_FILENAME",
    "DEFAULT_AGENT_PROMPT",
    "DEFAULT_AGENT_PROMPTS",
    "DEFAULT_REINJECT_EVERY",
    "AgentPromptFile",
    "agent_prompt_message",
    "needs_injection",
    "prompt_text",
]

AGENT_PROMPT_FILENAME: Final = "AGENT.md"
_COMMENT: Final = re.compile(r"<!--.*?-->", re.DOTALL)
DEFAULT_REINJECT_EVERY: Final = 100

DEFAULT_AGENT_PROMPT: Final = """\
# Agent

You are picobot, a personal assistant that people reach through chat apps
(Telegram, Feishu/Lark, WeChat, a terminal client).

- Reply in the language the user writes in.
- Be concise: chat messages are read on small screens. Use lists for steps.
- Use the tools you are given when they help, and say briefly what you did
  and what you found. Do not claim abilities your tools do not provide.
- When a request is ambiguous, ask one short clarifying question.
- Never reveal secrets such as API keys, tokens or passwords.

<!-- This file is re-read whenever it is injected into a conversation: edit it
     to change the agent's persona; no restart is needed. -->
"""

DEFAULT_AGENT_PROMPT_ZH_CN: Final = """\
# 智能体

你是 picobot，一个通过聊天应用（Telegram、飞书/Lark、微信、终端客户端）
与人交流的个人助理。

- 用用户所用的语言回复。
- 简洁：聊天消息多在小屏幕上阅读。步骤用列表列出。
- 有帮助时使用提供给你的工具，并简要说明你做了什么、发现了什么。
  不要声称拥有工具并不提供的能力。
- 请求含糊时，先问一个简短的澄清问题。
- 绝不泄露 API 密钥、令牌或密码等机密。

<!-- 每次注入对话时都会重新读取本文件：编辑它即可改变智能体的人设，
     无需重启。 -->
"""

# By locale tag, as the gateway names them ("en", "zh-CN").
DEFAULT_AGENT_PROMPTS: Final[Mapping[str, str]] = {
    "en": DEFAULT_AGENT_PROMPT,
    "zh-CN": DEFAULT_AGENT_PROMPT_ZH_CN,
}


class AgentPromptFile:
    """`<agent_dir>/AGENT.md`, created with `default` content on first use."""

    def __init__(self, agent_dir: Path, default: str = DEFAULT_AGENT_PROMPT) -> None:
        self.agent_dir = agent_dir
        self.path = agent_dir / AGENT_PROMPT_FILENAME
        self.default = default
        self._lock = asyncio.Lock()
        self._reads = 0  # reads started so far
        self._last: tuple[int, str] | None = None  # the newest finished read: (number, text)

    async def ensure(self) -> None:
        """Create the directory and the default file if they are missing."""
        await asyncio.to_thread(self._ensure_sync)

    async def load(self) -> str:
        """The current file content (created first if missing), read fresh:
        by a read that started after this call did. Calls that come together
        (many new chats at once) share such a read instead of each taking a
        worker thread."""
        started_before = self._reads
        async with self._lock:
            last = self._last
            if last is not None and last[0] > started_before:
                return last[1]
            self._reads += 1
            number = self._reads
            text = await asyncio.to_thread(self._load_sync)
            self._last = (number, text)
            return text

    def _ensure_sync(self) -> None:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        try:
            # "x" so a file written concurrently (or by the user) is never overwritten.
            with self.path.open("x", encoding="utf-8") as handle:
                handle.write(self.default)
        except FileExistsError:
            pass

    def _load_sync(self) -> str:
        self._ensure_sync()
        return prompt_text(self.path.read_text(encoding="utf-8"))


def prompt_text(content: str) -> str:
    """What the model gets of an AGENT.md: no memory-summary block (it holds
    every user's summary), no HTML comments (the operator's notes, which
    Markdown does not show either), no surrounding blank space."""
    return _COMMENT.sub("", strip_block(content)).strip()


def agent_prompt_message(content: str) -> ChatMessage:
    """The system message that carries AGENT.md into a conversation."""
    return ChatMessage.system(content, marker=Marker.AGENT_PROMPT)


def needs_injection(
    history: Sequence[ChatMessage],
    user_turns: int,
    last_injected_turn: int | None,
    every: int = DEFAULT_REINJECT_EVERY,
) -> bool:
    """Whether AGENT.md must be injected before the next user message.

    - An active history without an agent prompt (empty, or freshly reset)
      always gets one: it becomes the first system message.
    - Otherwise it is re-injected once `every` user turns have passed since the
      last injection; `every == 0` disables this.

    Turns are numbered from 1. `user_turns` is the session's user-turn counter
    now, before the incoming message is stored (so that message is turn
    `user_turns + 1`). `last_injected_turn` is the number of the turn the
    prompt was last injected before — the counter's value once that turn's
    user message was stored (`sessions.prompt_turn`). With `every == 100` the
    prompt precedes user messages 1, 101, 201, …
    """
    if every < 0:
        raise ValueError("every must be >= 0")
    if not any(m.marker == Marker.AGENT_PROMPT for m in history):
        return True
    if every == 0 or last_injected_turn is None:
        return False
    return user_turns + 1 - last_injected_turn >= every
