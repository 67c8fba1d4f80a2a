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
)
from channels.wecom_kf.api import KfApiError, KfError, KfHttpError

__all__ = ["SEND_WINDOW_CLOSED", "send_error", "split_bytes"]

SEND_WINDOW_CLOSED = 95001
RATE_LIMIT_ERRCODES = frozenset({45009, 45033})
SYSTEM_BUSY = -1


def split_bytes(text: str, max_bytes: int) -> list[str]:
    """`text` in parts of at most `max_bytes` of UTF-8, in one pass: each part
    takes as much as fits, cut at the last paragraph, line or word break in
    its second half, else at the byte limit (between characters). So parts
    come out full, and a customer's five-message allowance goes as far as it
    can (8,100 bytes of Chinese: 4 parts, not 5)."""
    parts: list[str] = []
    rest = text
    while len(encoded := rest.encode("utf-8")) > max_bytes:
        # whole characters only; one character at least, even one wider than the limit
        window = encoded[:max_bytes].decode("utf-8", errors="ignore") or rest[0]
        cut = _break_in_second_half(window, max_bytes)
        if cut is None:
            parts.append(window)
            rest = rest[len(window) :]
            continue
        parts.append(window[:cut].rstrip())
        rest = rest[cut:].lstrip("\n ")
    if rest or not parts:
        parts.append(rest)
    return [p for p in parts if p] or [""]


def _break_in_second_half(window: str, max_bytes: int) -> int | None:
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > 0 and len(window[:at].encode("utf-8")) * 2 >= max_bytes:
            return at
    return None


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
