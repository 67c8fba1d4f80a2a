"""The agent's tools as the root wires them: `setup` builds the built-in tools
from the config, `skills` the skill runtime and its context part (the only
gateway module that imports skills/), `mcp` the MCP servers, `subagents`
the `task` tool's service and catalogue.

Public: gateway.tools.setup, gateway.tools.skills, gateway.tools.mcp, gateway.tools.subagents
May import: agent, gateway.approvals, gateway.config, gateway.ops, gateway.turns, skills, storage
"""
