"""Configuration: the JSON file, its `${ENV}` placeholders and the frozen
pydantic models of every section (`core`: `Config`, `ConfigError`;
`loading`: `load_config`, `LoadedConfig`; one module per section family: agents and providers,
approval, skills, sub-agents). Loaded once by the composition root and
passed down; nothing reads it at run time. Every key is in docs/CONFIG.md.

Public: gateway.config.core, gateway.config.loading, gateway.config.agents, gateway.config.approval, gateway.config.limits, gateway.config.skills, gateway.config.subagents
May import: agent, channels, channels.base, scheduler.config, storage.url
"""
