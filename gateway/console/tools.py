"""The agent's tools in the console: MCP servers and skills.

MCP: each configured server (`mcpServers`, in the file's order) as the
running manager holds it: up, connecting, down (with the last error and when
it tries again) or inactive (`isActive: false`), and its tools: the name the
model gets, whether it is offered and if not why (`tools.disabled`, a name
another tool has, a task-only tool). A server that stops answering shows down
once its connection drops or its next ping fails (`ping_interval_secs`).

Skills: the skills loaded now, the ones disabled (in a skill-state.json), the
SKILL.md files skipped and why, and the latest skill events. Disable and
enable go through `SkillRuntime.switch`, as `skill_manage` and `picobot
skills disable|enable` do: disable writes $PICOBOT_HOME's skill-state.json,
enable takes the name out of that file and the project's, so it is on again
whoever turned it off. The files outlive a restart; the runtime reloads at
once, so the next turn's index has the change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from aiohttp import web

from agent.mcp.naming import tool_name
from agent.tools.base import ToolError
from gateway.console.api import ConsoleError, Route, json_response, principal_of
from gateway.ops.logging import redact_text
from storage.store import Store

if TYPE_CHECKING:
    from agent.mcp.config import McpServerConfig
    from agent.mcp.manager import McpManager
    from agent.mcp.server import McpServer
    from gateway.config.core import Config

__all__ = ["SkillRuntimeView", "ToolsView"]

EVENTS_SHOWN: Final = 30
DESCRIPTION_CHARS: Final = 300
SKILLS_OFF: Final = "skills are off (skills.enabled: false)"


# -- what the view uses of skills.runtime.SkillRuntime (gateway/ may not import skills/)
class _Skill(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def warning(self) -> str | None: ...


class _Skipped(Protocol):
    @property
    def path(self) -> Path: ...
    @property
    def source(self) -> str: ...
    @property
    def reason(self) -> str: ...


class _Scan(Protocol):
    @property
    def skills(self) -> Mapping[str, _Skill]: ...
    @property
    def off(self) -> Mapping[str, _Skill]: ...
    @property
    def disabled(self) -> AbstractSet[str]: ...
    @property
    def invalid(self) -> Sequence[_Skipped]: ...
    @property
    def lenient(self) -> Sequence[_Skipped]: ...
    @property
    def problems(self) -> Sequence[str]: ...
    @property
    def refused(self) -> Sequence[str]: ...


class SkillRuntimeView(Protocol):
    async def current(self) -> _Scan: ...

    async def switch(
        self,
        names: Sequence[str],
        *,
        enable: bool,
        scopes: Sequence[Literal["user", "project"]],
        detail: str | None = None,
    ) -> tuple[list[Path], list[str]]: ...


@dataclass(frozen=True, slots=True)
class ToolsView:
    store: Store
    mcp: McpManager | None
    mcp_servers: Mapping[str, McpServerConfig]  # the config's mcpServers
    disabled_tools: frozenset[str]  # tools.disabled
    skills: SkillRuntimeView | None  # None: skills.enabled is false

    @classmethod
    def of(cls, store: Store, mcp: McpManager | None, config: Config, skills: Any) -> ToolsView:
        """`skills`: the gateway's skills.runtime.SkillRuntime, or None."""
        return cls(store, mcp, config.mcp_servers, frozenset(config.tools.disabled), skills)

    def routes(self) -> Sequence[Route]:
        return [
            Route("GET", "/mcp", self.servers),
            Route("GET", "/skills", self.skill_list),
            Route("POST", "/skills/{name}/disable", self.disable, action="skills.disable"),
            Route("POST", "/skills/{name}/enable", self.enable, action="skills.enable"),
        ]

    # -- MCP ---------------------------------------------------------------------------
    async def servers(self, _request: web.Request) -> web.StreamResponse:
        running = self.mcp.servers if self.mcp is not None else {}
        shown = []
        for key, config in self.mcp_servers.items():
            server = running.get(key)
            if server is None:
                shown.append(
                    {
                        "key": key,
                        "name": config.name or key,
                        "transport": str(config.transport),
                        "state": "inactive",
                        "tools": [],
                    }
                )
            else:
                shown.append(self._server(server))
        return json_response({"servers": shown})

    def _server(self, server: McpServer) -> dict[str, Any]:
        """`why` a tool is not offered: "disabled" (tools.disabled), "name_taken"
        (a built-in tool or another server's has the name), "task_only" (the
        server runs it only as a task)."""
        status = server.status()
        offered = {spec.name for spec in self.mcp.specs()} if self.mcp is not None else set()
        tools = []
        for tool in server.tools:
            name = tool_name(server.key, tool.name)
            why = None
            if name not in offered:
                why = "disabled" if name in self.disabled_tools else "name_taken"
            tools.append(_tool(name, tool.name, tool.description or tool.title, why))
        for tool_id, _ in server.left_out:
            tools.append(_tool(tool_name(server.key, tool_id), tool_id, None, "task_only"))
        return {
            "key": status.key,
            "name": status.name,
            "transport": str(status.transport),
            "state": str(status.state),
            "error": None if status.error is None else redact_text(status.error),
            "retry_in_secs": (
                None if status.retry_in_secs is None else round(status.retry_in_secs, 1)
            ),
            "tools": tools,
        }

    # -- skills --------------------------------------------------------------------------
    async def skill_list(self, _request: web.Request) -> web.StreamResponse:
        events = [
            {
                "at": e.created_at.isoformat(timespec="seconds") if e.created_at else None,
                "event": e.event,
                "skill": e.skill,
                "source": e.source,
                "where": f"{e.channel}:{e.chat_id}" if e.channel else None,
                "detail": redact_text(e.detail) if e.detail else None,
            }
            for e in reversed(await self.store.skill_events(None, EVENTS_SHOWN))
        ]
        if self.skills is None:
            return json_response({"enabled": False, "events": events})
        scan = await self.skills.current()
        off = [
            _skill(scan.off[n]) if n in scan.off else {"name": n, "source": None}
            for n in sorted(scan.disabled)
        ]
        return json_response(
            {
                "enabled": True,
                "loaded": [_skill(s) for s in scan.skills.values()],
                "disabled": off,
                "skipped": [_skipped(i) for i in scan.invalid],
                "warnings": [_skipped(i) for i in scan.lenient],
                "problems": [redact_text(p) for p in (*scan.problems, *scan.refused)],
                "events": events,
            }
        )

    async def disable(self, request: web.Request) -> web.StreamResponse:
        return await self._switch(request, enable=False)

    async def enable(self, request: web.Request) -> web.StreamResponse:
        return await self._switch(request, enable=True)

    async def _switch(self, request: web.Request, *, enable: bool) -> web.StreamResponse:
        if self.skills is None:
            raise ConsoleError(409, SKILLS_OFF)
        name = request.match_info["name"]
        scan = await self.skills.current()
        if enable and name not in scan.disabled:
            found = name in scan.skills
            raise ConsoleError(409 if found else 404, _not_off(name, found))
        if not enable and name not in scan.skills:
            found = name in scan.disabled
            raise ConsoleError(409 if found else 404, _not_on(name, found))
        by = principal_of(request).name
        try:
            paths, _ = await self.skills.switch(
                [name],
                enable=enable,
                scopes=["user", "project"] if enable else ["user"],
                detail=f"console ({by})",
            )
        except ToolError as exc:  # a skill-state.json that is not what it should be
            raise ConsoleError(409, str(exc)) from None
        done = "enabled" if enable else "disabled"
        return json_response({done: name, "files": [str(p) for p in paths]})


def _tool(name: str, own: str, about: str | None, why: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "tool": own,
        "description": (about or "")[:DESCRIPTION_CHARS],
        "offered": why is None,
        "why": why,
    }


def _skill(skill: _Skill) -> dict[str, Any]:
    return {
        "name": skill.name,
        "source": str(skill.source),
        "description": skill.description[:DESCRIPTION_CHARS],
        "path": str(skill.path),
        "warning": skill.warning,
    }


def _skipped(item: _Skipped) -> dict[str, Any]:
    return {"path": str(item.path), "source": str(item.source), "reason": redact_text(item.reason)}


def _not_off(name: str, found: bool) -> str:
    return f"skill {name!r} is not disabled" if found else f"no skill named {name!r}"


def _not_on(name: str, found: bool) -> str:
    return f"skill {name!r} is disabled already" if found else f"no skill named {name!r}"
