"""Keep the bot token out of logs and error text.

The token is part of every Bot API URL, so third-party loggers (httpx logs each
request URL at INFO; PTB logs its base URL at DEBUG, and its InvalidToken error
quotes the token) would leak it. `Redactor` scrubs given text, and while
installed it rewrites records of those loggers before any handler sees them.

It also drops PTB's ERROR line (with traceback) for an error page that is not
JSON, which is what Telegram's front end answers with a 502 while the Bot API
is down: PTB raises right after, the channel maps the error, and the
dispatcher says once that the channel is degraded; that line would repeat it
on every attempt.
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
_PTB_REQUEST_LOGGER = "telegram.request.BaseRequest"
_PTB_NOT_JSON = "Can not load invalid JSON data"


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
        if record.name == _PTB_REQUEST_LOGGER and str(record.msg).startswith(_PTB_NOT_JSON):
            return False
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
