"""The configuration view: the configuration the gateway runs with, secrets
masked, and what `picobot doctor`'s checks find (gateway.ops.doctor, the
CLI's own code). Read-only: nothing here edits the config.

Masked as the log masks (gateway.ops.logging): every SecretStr, every value
under a key the redactor takes for a secret's (`api_key`, `token`, `tokens`,
`keys`, `secret`, …), every registered secret and credential pattern in any
string; besides, every value of an MCP server's `env` and `headers` and of a
provider's `extra_headers` (where secrets live under any name), and the
password of `storage.url`. An unset secret shows as "".
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePath
from typing import Any, Final

import structlog
from aiohttp import web
from pydantic import SecretStr

from gateway.config.core import Config
from gateway.config.loading import LoadedConfig
from gateway.console.api import ConsoleError, Route, json_response
from gateway.ops.doctor.findings import Finding, Status
from gateway.ops.logging import MASK, redact_data, redact_text
from storage.url import redact_url

__all__ = ["DoctorRuns", "SettingsView", "masked_config"]

log = structlog.get_logger(__name__)

WAIT_SECS: Final = 20.0  # a request waits this long for the checks, then gets 504
PROBE_TIMEOUT_SECS: Final = 5.0  # each provider and channel API call, as `doctor --probe`


@dataclass(frozen=True, slots=True)
class SettingsView:
    loaded: LoadedConfig
    doctor: DoctorRuns = field(default_factory=lambda: DoctorRuns())

    def routes(self) -> Sequence[Route]:
        return [Route("GET", "/config", self.config), Route("GET", "/doctor", self.findings)]

    async def config(self, _request: web.Request) -> web.StreamResponse:
        loaded = self.loaded
        return json_response(
            {
                "path": None if loaded.path is None else redact_text(str(loaded.path)),
                "home": redact_text(str(loaded.home)),
                "env_admins": list(loaded.env_admins),
                "missing_env": dict(sorted(loaded.missing_env_in_use.items())),
                "config": masked_config(loaded.config),
            }
        )

    async def findings(self, request: web.Request) -> web.StreamResponse:
        """?probe=1 also calls each provider and channel API once (`doctor --probe`)."""
        probe = request.query.get("probe") in ("1", "true")
        found = await self.doctor.findings(self.loaded, probe=probe)
        return json_response(
            {
                "probed": probe,
                "problems": sum(f.status is Status.PROBLEM for f in found),
                "warnings": sum(f.status is Status.WARN for f in found),
                "findings": [
                    {
                        "status": f.status.value,
                        "check": f.check,
                        "message": redact_text(f.message),
                        "fix": None if f.fix is None else redact_text(f.fix),
                    }
                    for f in found
                ],
            }
        )


class DoctorRuns:
    """The doctor's checks for the console: the blocking ones in a thread of
    their own, one run at a time (a request meanwhile waits for the same run),
    each request waiting at most WAIT_SECS; the probes with their own timeouts.

    The thread is a daemon: a check that takes long (an integrity check of a
    huge database) never holds up the gateway's exit, as a thread of the
    loop's executor would."""

    def __init__(self) -> None:
        self._running: asyncio.Future[list[Finding]] | None = None

    async def findings(self, loaded: LoadedConfig, *, probe: bool) -> list[Finding]:
        running = self._running
        if running is None or running.done():
            running = self._running = _in_thread(loaded)
        try:
            async with asyncio.timeout(WAIT_SECS):
                found = list(await asyncio.shield(running))
                if probe:
                    from gateway.ops.doctor.probe import probe_all  # at first use

                    found += await probe_all(loaded, PROBE_TIMEOUT_SECS)
        except TimeoutError:
            raise ConsoleError(
                504, f"the checks took more than {WAIT_SECS:.0f} s; try again later"
            ) from None
        except Exception as exc:  # a check that broke: say so, keep the gateway
            log.exception("console_doctor_failed")
            raise ConsoleError(500, redact_text(f"the checks failed: {exc!r}")) from None
        return found


def _in_thread(loaded: LoadedConfig) -> asyncio.Future[list[Finding]]:
    """`offline_findings(loaded)` in a daemon thread, as a future of this loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[list[Finding]] = loop.create_future()

    def settle(found: list[Finding] | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(found or [])
        else:
            future.set_exception(error)
            future.exception()  # read: a failure nobody waits for any more is no "lost" error

    def run() -> None:
        found: list[Finding] | None = None
        error: Exception | None = None
        try:
            # imported at first use: the checks load the storage backends' own
            # modules, which a gateway that never opens this view does not need
            from gateway.ops.doctor.checks import offline_findings

            found = offline_findings(loaded)
        except Exception as exc:  # handed to whoever waits
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, found, error)

    threading.Thread(target=run, name="console-doctor", daemon=True).start()
    return future


def masked_config(config: Config) -> dict[str, Any]:
    """`config` as JSON with its keys as the file spells them, secrets masked."""
    raw = _plain(config.model_dump(mode="python", by_alias=True))
    for server in raw.get("mcpServers", {}).values():
        for name in ("env", "headers"):
            server[name] = _masked_values(server.get(name))
    for provider in raw.get("providers", {}).values():
        provider["extra_headers"] = _masked_values(provider.get("extra_headers"))
    storage = raw.get("storage", {})
    if isinstance(storage.get("url"), str):
        storage["url"] = redact_url(storage["url"])
    masked = redact_data(raw)
    assert isinstance(masked, dict)
    return masked


def _plain(node: Any) -> Any:
    """A dumped model as JSON values: SecretStr as the mask ("" when unset)."""
    if isinstance(node, SecretStr):
        return MASK if node.get_secret_value() else ""
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list | tuple | set | frozenset):
        return [_plain(v) for v in node]
    if isinstance(node, Enum):
        return _plain(node.value)
    if node is None or isinstance(node, bool | int | float | str):
        return node
    if isinstance(node, PurePath):
        return str(node)
    return str(node)  # a value type of the config (a daily time, …): as it reads


def _masked_values(values: object) -> object:
    if not isinstance(values, Mapping):
        return values
    return {k: MASK if v else v for k, v in values.items()}
