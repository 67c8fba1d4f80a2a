"""Ingress: from the bus to a session's queue. `inbound.InboundProcessor`
records every message in the durable inbox (deduplicated) before the channel
acknowledges it, applies the access gate, runs commands in their lanes and
hands the rest to the session manager; after a crash it resumes unfinished
rows. `dead_letters` keeps what cannot be parsed or recorded. `handover`
forwards a message to the worker that holds its chat and takes over what dead
workers left, with several workers on one database (docs/scale-out.md).

Public: gateway.ingress.inbound, gateway.ingress.dead_letters
May import: gateway.access, gateway.bus, gateway.cluster, gateway.commands, gateway.config, gateway.i18n, gateway.lifecycle, gateway.ops, gateway.sessions, gateway.spend, gateway.work, storage
"""
