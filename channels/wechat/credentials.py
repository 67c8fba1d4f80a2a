"""The WeChat bot credentials file: what QR login yields and the channel reads.

A small JSON file, written atomically with mode 0600 in a 0700 directory. The
bot token is a secret: `Credentials.__repr__` hides it and nothing here logs.
The channel marks the file `expired` when iLink answers ret −14, so the next
`picobot channels login wechat` knows a new QR login is needed.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "CredentialWatch",
    "Credentials",
    "default_home",
    "load_credentials",
    "mark_expired",
    "resolve_cred_path",
    "save_credentials",
]


@dataclass(frozen=True, slots=True)
class Credentials:
    bot_token: str = field(repr=False)
    ilink_bot_id: str
    baseurl: str
    ilink_user_id: str
    saved_at: str = ""
    expired: bool = False


def default_home() -> Path:
    """$PICOBOT_HOME or ~/.picobot (what the gateway itself uses)."""
    home = os.environ.get("PICOBOT_HOME")
    return Path(home).expanduser() if home else Path.home() / ".picobot"


def resolve_cred_path(cred_path: str | None, home: Path) -> Path:
    return Path(cred_path).expanduser() if cred_path else home / "wechat" / "credentials.json"


def load_credentials(path: Path) -> Credentials | None:
    """None when the file is missing, unreadable or has no bot token."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not raw.get("bot_token"):
        return None
    return Credentials(
        bot_token=str(raw["bot_token"]),
        ilink_bot_id=str(raw.get("ilink_bot_id") or ""),
        baseurl=str(raw.get("baseurl") or ""),
        ilink_user_id=str(raw.get("ilink_user_id") or ""),
        saved_at=str(raw.get("saved_at") or ""),
        expired=bool(raw.get("expired", False)),
    )


def save_credentials(path: Path, creds: Credentials) -> Credentials:
    """Write atomically (temp file + rename), mode 0600; returns what was written."""
    if not creds.saved_at:
        creds = replace(creds, saved_at=datetime.now(UTC).isoformat())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(creds), fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)  # O_CREAT's mode is masked by umask; make sure
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return creds


def mark_expired(path: Path, token: str) -> None:
    """Flag the saved credentials as expired, if they still hold `token`."""
    creds = load_credentials(path)
    if creds is not None and creds.bot_token == token and not creds.expired:
        save_credentials(path, replace(creds, expired=True))


class CredentialWatch:
    """The credentials in use, and a way to wait for fresh ones on disk.

    The CLI login writes the file from another process, so there is no event to
    await: `wait_for_new` re-reads the file every `check_every` seconds.
    """

    def __init__(self, path: Path, check_every: float) -> None:
        self.path = path
        self._check_every = check_every
        self.current: Credentials | None = None

    async def load(self) -> Credentials | None:
        self.current = await asyncio.to_thread(load_credentials, self.path)
        return self.current

    async def mark_expired(self) -> None:
        if self.current is not None:
            await asyncio.to_thread(mark_expired, self.path, self.current.bot_token)
            self.current = replace(self.current, expired=True)

    async def wait_for_new(self, max_wait: float | None) -> bool:
        """Until usable credentials other than the current (stale) ones appear.

        True when new ones were loaded into `current`; False when `max_wait`
        passed first (the caller then retries what it has).
        """
        loop = asyncio.get_running_loop()
        deadline = None if max_wait is None else loop.time() + max_wait
        stale = self.current.bot_token if self.current is not None else None
        while True:
            found = await asyncio.to_thread(load_credentials, self.path)
            if found is not None and not found.expired and found.bot_token != stale:
                self.current = found
                return True
            delay = self._check_every
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                delay = min(delay, remaining)
            await asyncio.sleep(delay)
