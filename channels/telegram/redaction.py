"""Keep the bot token out of logs and error text.

The token is part of every Bot API URL, so third-party loggers (httpx logs each
request URL at INFO; PTB logs its base URL at DEBUG, and its InvalidToken error
quotes the token) would leak it. `Redactor` scrubs given text, and while
installed it rewrites records of those loggers before any handler sees them.
"""

from __future__ import annotations

import logging

__all__ = ["Redactor"]

_THIRD_PARTY_LOGGERS = (
    "httpx",
    "httpcore",
    "telegram",
    "telegram.Bot",
    "telegram.request.BaseRequest",
    "telegram.request.HTTPXRequest",
)
_MASK = "<redacted>"


class Redactor(logging.Filter):
    def __init__(self, *secrets: str) -> None:
        super().__init__()
        self._secrets = tuple(s for s in secrets if s)
        self._installed = False

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True

    def install(self) -> None:
        if not self._installed:
            for name in _THIRD_PARTY_LOGGERS:
                logging.getLogger(name).addFilter(self)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            for name in _THIRD_PARTY_LOGGERS:
                logging.getLogger(name).removeFilter(self)
            self._installed = False
