"""MCP (Model Context Protocol) servers as tools, through the official `mcp` SDK.

config (the `mcpServers` section) → transport (stdio child / streamable HTTP)
→ server (one supervised connection) → manager (all servers: the tools offered
now, the status line the model reads). Imports only agent.* and third-party
libraries; the composition root wires it.

Nothing is re-exported here: importing the SDK takes a good part of a second,
and the config loader (which every `picobot` command runs) needs only
`agent.mcp.config`.
"""
