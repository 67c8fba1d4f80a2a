"""Delivery: from outbox rows to the platform. `outbound.OutboundDispatcher`
sends each channel's rows with its own sender task, `policy` decides what a
failed send becomes (retry, park, fail), `health` tracks whether a platform
takes our sends, `runtime` is what the root hands each channel
(`ChannelRuntime`), `registry` builds the enabled channels (the one module
here that imports concrete channels), `files` turns `send_file` into rows.

Public: gateway.delivery.outbound
May import: agent, channels, channels.base, gateway.bus, gateway.config, gateway.i18n, gateway.ingress, gateway.lifecycle, gateway.ops, gateway.turns, storage
"""
