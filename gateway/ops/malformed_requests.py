"""aiohttp's report of a request it could not parse, as a throttled warning.

aiohttp logs every malformed request (a bad method after the first request
of a connection, an 8 KB URL, a bad header, broken chunked framing) on the
`aiohttp.server` logger at error level with a traceback: some 40 bytes of
log for each byte a peer sends. `MalformedRequestFilter`, installed on that
logger by `gateway.ops.logging.configure_logging`, turns such a record into one
`http_request_malformed` warning without a traceback, at most once per peer
address per interval, carrying the count of those it suppressed since the
last one. Any other record of the logger (an exception in a handler of ours)
passes unchanged. Its memory is bounded: once `max_peers` peers were seen
within an interval, further peers share one line an interval (`peer: "other"`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["SERVER_LOGGER", "MalformedRequestFilter"]

SERVER_LOGGER: Final = "aiohttp.server"
EVENT: Final = "http_request_malformed"
REASON_CHARS: Final = 120  # of the parser's message, which may quote what the peer sent
OTHER_PEERS: Final = "other"


@dataclass(slots=True)
class _Peer:
    logged_at: float
    suppressed: int = 0


class MalformedRequestFilter(logging.Filter):
    def __init__(
        self,
        interval_secs: float = 60.0,
        max_peers: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.interval_secs = interval_secs
        self.max_peers = max_peers
        self._clock = clock
        self._lock = threading.Lock()
        # by the time of each peer's last line, oldest first
        self._peers: OrderedDict[str, _Peer] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError) or record.levelno < logging.WARNING:
            return True
        if not logging.getLogger(record.name).isEnabledFor(logging.WARNING):
            return False  # the record passed as an error; as a warning it would not
        peer = str(record.args[0]) if isinstance(record.args, tuple) and record.args else "?"
        admitted = self._admit(peer)
        if admitted is None:
            return False
        peer, suppressed = admitted
        reason = " ".join(str(exc.message).split())[:REASON_CHARS]
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = EVENT, ()
        record.exc_info, record.exc_text = None, None
        # shown as fields of the line (structlog's ExtraAdder)
        record.peer, record.status, record.reason = peer, exc.code, reason
        record.error = type(exc).__name__
        record.suppressed = suppressed
        return True

    def _admit(self, peer: str) -> tuple[str, int] | None:
        """None: suppress this one; otherwise the peer it is counted for (maybe
        "other") and how many of that peer's were suppressed before it."""
        now = self._clock()
        with self._lock:
            peers = self._peers
            if peer not in peers and len(peers) >= self.max_peers:
                oldest = next(iter(peers.values()))
                if now - oldest.logged_at >= self.interval_secs:
                    peers.popitem(last=False)  # room only under pressure: counts stay right
                else:
                    peer = OTHER_PEERS
            entry = peers.get(peer)
            if entry is not None and now - entry.logged_at < self.interval_secs:
                entry.suppressed += 1
                return None
            suppressed = entry.suppressed if entry is not None else 0
            peers[peer] = _Peer(now)
            peers.move_to_end(peer)
            if len(peers) > self.max_peers:  # "other" may be the one beyond the bound
                peers.popitem(last=False)
            return peer, suppressed
