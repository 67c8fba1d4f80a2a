"""SKILL.md skills (DESIGN §2, docs/skills.md): discovery from six sources plus
the built-in ones, front-matter parsing, state files, the bounded index and the
`skill_activate` / `skill_manage` tools.

Imports only `agent.tools` (the tool protocol), the standard library and
third-party packages; the composition root wires it to the context builder
and to storage (usage events go through `SkillEventSink`).
"""
