"""Sub-agents: the types the `task` tool can run (built-in and SUBAGENT.md)."""
