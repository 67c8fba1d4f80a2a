"""Real MCP servers for tests, written with the SDK's FastMCP (run as child processes)."""
