"""Sessions: a conversation's sessions and its queue. `manager.SessionManager`
runs one turn at a time per conversation and conversations concurrently (and
retries a turn storage refused); `commands` are /new, /sessions, /use and
the rest; `steering` is /approve, /deny and /steer over a running turn;
`messages` is send_session_message's messenger; `compaction` shortens long
histories in the background; `usage` is what /status shows.

Public: gateway.sessions.commands, gateway.sessions.manager
May import: agent, gateway.approvals, gateway.bus, gateway.clock, gateway.commands, gateway.config, gateway.i18n, gateway.lifecycle, gateway.ops, gateway.spend, gateway.turns, gateway.work, storage
"""
