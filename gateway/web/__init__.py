"""The web front end: the packaged single-page UI at `/` (its console reads
`/api/ops/`, served by gateway.console), and the storage-backed answers to
the WebSocket channel's queries. Wired by the composition root
(gateway/app.py).

Public: gateway.web.directory, gateway.web.owners, gateway.web.static
May import: agent, channels.base, gateway.bus, gateway.commands, gateway.config, gateway.i18n, storage
"""
