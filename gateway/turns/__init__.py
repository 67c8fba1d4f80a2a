"""Turns: one run of the agent for one conversation, from inbox rows to outbox
rows. `opener` opens it (session, history, new messages, `session_reset`),
`plan` says what was asked and by whom, `execution` runs the agent loop and
commits its messages and replies, `run_slots` caps how many run at once,
`agents` resolves the agent profile, `feedback`, `tool_progress` and
`chat_policy` decide what the chat sees while it runs, `replies` what the
turn adds besides the model's words, `transcription` turns voice into text
first.

Public: gateway.turns.agents, gateway.turns.chat_policy, gateway.turns.execution, gateway.turns.opener, gateway.turns.replies, gateway.turns.run_slots, gateway.turns.session_reset
May import: agent, channels.base, gateway.approvals, gateway.bus, gateway.clock, gateway.config, gateway.i18n, gateway.ops, gateway.spend, gateway.work, storage
"""
