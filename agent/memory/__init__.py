"""Long-term memory, agent side: the value types and limits the memory tools
and the memory service share, the AGENT.md summary block, the context part
that injects a sender's own summary, and the maintenance plan (docs/memory.md).
Never imports the gateway or storage."""
