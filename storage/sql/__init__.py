"""The SQL, by table family, that every backend runs: `conversations/`
(sessions, messages, turns), `delivery/` (inbox, outbox, dead letters,
channel state), `memory/`, `access/` (pairings, chat owners, rate events),
`approvals`, `jobs`, `retention`, `skill_events`. Sync functions taking a
connection, run by a backend's `db` in its thread; the only code that speaks
SQL to the tables.
"""
