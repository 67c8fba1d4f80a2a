"""Access control: who the bot answers (docs/access.md). `policy.AccessPolicy`
is the one policy for every channel (admins, allow_from, pairings), `gate`
applies it to inbound messages and rate-limits refusals, `pairing` holds the
pairing codes' rules, `commands` are /whoami and /pair.

Public: gateway.access.gate, gateway.access.policy, gateway.access.pairing, gateway.access.rate
May import: channels.base, gateway.bus, gateway.commands, gateway.config, gateway.i18n, gateway.spend, gateway.work, storage
"""
