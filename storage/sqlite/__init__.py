"""The SQLite backend: `db` (aiosqlite connection, pragmas, versioned
migrations, one writer with group commits), `migrations`, `backup`,
`health`, and the SQL by table family: `conversations/` (sessions, messages,
turns), `delivery/` (inbox, outbox, dead letters, channel state), `memory/`,
`access/` (pairings, chat owners, rate events), `approvals`, `jobs`,
`retention`, `skill_events`. Sync functions taking a connection, run by
`db` in its thread; the only code that speaks SQL.
"""
