"""Approvals: tool calls held for a person's yes (docs/approvals.md).
`service.Approvals` holds a call, asks the chat and carries the turn on after
the answer; `timeouts` expires pending ones; `texts` is what the chat reads
(the console shows held calls as the chat does). The commands that answer
them live in gateway.sessions.steering; the console answers through `decide`.

Public: gateway.approvals.service, gateway.approvals.texts
May import: agent, gateway.access, gateway.bus, gateway.clock, gateway.i18n, gateway.lifecycle, gateway.ops, gateway.work, storage
"""
