"""`send_file`: the agent sends a file from its workspace to the current chat.

The path goes through the same guard as `read` (the workspace, or a folder
`read` may read, such as received attachments), then to the gateway's
`FileSender`, which copies the file and queues it in the durable outbox like
any reply: it is delivered once, also across a restart, and before the turn's
final answer. The file is checked to be a regular file here, off the event loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from agent.tools.paths import resolve_for_read

__all__ = ["SendFileTool"]


class SendFileArgs(ToolArgs):
    path: str
    caption: str = Field(default="", max_length=1000)


def _regular_file(path: str, ctx: ToolContext) -> Path:
    target = resolve_for_read(path, ctx.settings)
    if not target.is_file():
        raise ToolError(f"{path} is not a file")
    return target


class SendFileTool(Tool[SendFileArgs]):
    name: ClassVar[str] = "send_file"
    description: ClassVar[str] = (
        "Send a workspace file (image, PDF, any document) to this chat, when the user "
        "should get the file itself."
    )
    Args: ClassVar[type[ToolArgs]] = SendFileArgs

    async def run(self, args: SendFileArgs, ctx: ToolContext) -> str:
        sender = ctx.services.files
        if sender is None:
            raise ToolError("sending files is not available in this gateway")
        target = await asyncio.to_thread(_regular_file, args.path, ctx)
        return await sender.send_file(
            ctx.channel, ctx.chat_id, target, caption=args.caption, reply_to=ctx.reply_to
        )
