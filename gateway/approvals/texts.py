"""What the gateway writes about approvals: the request a chat gets (in the
asker's language, gateway.i18n), and the tool results the model reads for
calls a person did not let run (English, like every text for the model)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.messages import ToolCall
from gateway.i18n import Locale, Msg, tr
from gateway.ops.logging import redact_data, redact_text

__all__ = [
    "SUPERSEDED",
    "TIMED_OUT_BY",
    "denied_result",
    "request_text",
    "shown_call",
]

_SHOWN_MAX = 1500  # of one call's arguments: a person must see what would run
TIMED_OUT_BY = "timeout"  # `decided_by` of a request nobody answered in time
SUPERSEDED = "superseded"  # `decided_by` of a request a newer message replaced


def shown_call(call: ToolCall) -> str:
    """The call as the person deciding sees it: a shell command verbatim,
    other arguments as JSON; secrets masked either way."""
    try:
        raw = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):  # not JSON; nested too deeply to read
        raw = call.arguments
    data = redact_data(raw)
    if isinstance(data, dict) and isinstance(data.get("command"), str) and len(data) <= 2:
        text = data["command"]
    else:
        text = json.dumps(data, ensure_ascii=False)
    text = redact_text(text)
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 1] + "…"


def _as_code(text: str) -> str:
    """Markdown code, so that the chat shows the command as it would run
    (`*` and `_` in a shell command are not emphasis)."""
    if "`" in text:
        return text  # no code span can hold it safely on every channel: as is
    return f"`{text}`" if "\n" not in text else f"\n```\n{text}\n```"


def _duration(secs: float, locale: Locale = Locale.EN) -> str:
    if secs >= 3600 and secs % 3600 == 0:
        return tr(locale, Msg.HOURS, n=f"{secs / 3600:g}")
    if secs >= 60:
        return tr(locale, Msg.MINUTES, n=f"{secs / 60:g}")
    return tr(locale, Msg.SECONDS, n=f"{secs:g}")


def request_text(
    approval_id: int, held: Sequence[ToolCall], timeout_secs: float, locale: Locale
) -> str:
    """What the chat reads (catalogue texts); the calls themselves as they would run."""
    lines = [tr(locale, Msg.TOOL_APPROVAL_ASK, id=approval_id)]
    lines += [f"• {c.name}: {_as_code(shown_call(c))}" for c in held]
    timeout = _duration(timeout_secs, locale)
    lines.append(tr(locale, Msg.TOOL_APPROVAL_HOW, id=approval_id, timeout=timeout))
    return "\n".join(lines)


def denied_result(reason: str | None, decided_by: str | None, timeout_secs: float) -> str:
    """The tool result the model reads for a held call that did not run."""
    if decided_by == TIMED_OUT_BY:
        return f"[denied: nobody approved it within {_duration(timeout_secs)}]"
    if decided_by == SUPERSEDED:
        return "[denied: the user sent a new message instead of approving]"
    return f"[denied by user: {reason or 'no reason given'}]"
