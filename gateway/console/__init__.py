"""The operator's console: the admin-only API under `/api/ops/` that the web
UI's console views read and act through. Views of data the gateway already
has, and actions through the same code paths as the chat commands and the
CLI; never a second source of truth.

Public: gateway.console.api, gateway.console.guard, gateway.console.setup
May import: agent, channels.base, gateway.access, gateway.approvals, gateway.bus, gateway.clock, gateway.commands, gateway.config, gateway.delivery, gateway.i18n, gateway.ingress, gateway.memory, gateway.ops, gateway.sessions, gateway.spend, gateway.web, storage
"""
