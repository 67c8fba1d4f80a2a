"""Replies through `kf/send_msg`: text split by UTF-8 bytes, errcodes → the channel error tree.

    -1, HTTP 5xx, transport errors   TransientSendError (retried with backoff)
    45009, 45033 (API frequency)     RateLimited
    95001 (the 48 h / 5 messages     PermanentSendError: the customer must write
      rule: quota used or expired)     again before anything can be sent
    any other errcode ≥ 40000        PermanentSendError (bad user, account, content)
    anything else                    TransientSendError

Token expiry (42001 and kin) never gets here: the client refreshes and retries once.
"""

from __future__ import annotations

from channels.base import (
    ChannelError,
    PermanentSendError,
    RateLimited,
    TransientSendError,
    split_text,
)
from channels.wecom_kf.api import KfApiError, KfError, KfHttpError

__all__ = ["SEND_WINDOW_CLOSED", "send_error", "split_bytes"]

SEND_WINDOW_CLOSED = 95001
RATE_LIMIT_ERRCODES = frozenset({45009, 45033})
SYSTEM_BUSY = -1


def split_bytes(text: str, max_bytes: int) -> list[str]:
    """Like `split_text`, but every part is at most `max_bytes` of UTF-8."""
    return _split(text, max_bytes, max_bytes)


def _split(text: str, char_limit: int, max_bytes: int) -> list[str]:
    parts: list[str] = []
    for chunk in split_text(text, char_limit):
        encoded = chunk.encode("utf-8")
        if len(encoded) <= max_bytes:
            parts.append(chunk)
            continue
        # As many characters as fit from the start; fewer than the chunk has
        # (it is too long), so the recursion ends.
        fits = max(1, len(encoded[:max_bytes].decode("utf-8", errors="ignore")))
        parts.extend(_split(chunk, fits, max_bytes))
    return parts


def send_error(exc: KfError, rate_limit_retry_secs: float) -> ChannelError:
    if isinstance(exc, KfApiError):
        code = exc.errcode
        if code in RATE_LIMIT_ERRCODES:
            return RateLimited(str(exc), rate_limit_retry_secs)
        if code == SEND_WINDOW_CLOSED:
            return PermanentSendError(
                f"{exc}: WeCom allows 5 messages within 48 h of the customer's last message; "
                "nothing more can be sent until they write again"
            )
        if code == SYSTEM_BUSY:
            return TransientSendError(str(exc))
        if 40000 <= code < 100000:
            return PermanentSendError(str(exc))
        return TransientSendError(str(exc))
    if isinstance(exc, KfHttpError) and 400 <= exc.status < 500 and exc.status != 429:
        return PermanentSendError(str(exc))
    if isinstance(exc, KfHttpError) and exc.status == 429:
        return RateLimited(str(exc), rate_limit_retry_secs)
    return TransientSendError(str(exc))
