"""Access control: who the bot answers (docs/access.md). `policy.AccessPolicy`
is the one policy for every channel (admins, allow_from, pairings), `gate`
applies it to inbound messages and rate-limits refusals, `later` keeps
messages over their sender's rate for later (`limits.over_rate`), `pairing` holds the
pairing codes' rules, `commands` are /whoami and /pair.

Public: gateway.access.gate, gateway.access.policy, gateway.access.pairing, gateway.access.rate, gateway.access.later
May import: channels.base, gateway.bus, gateway.commands, gateway.config, gateway.i18n, gateway.lifecycle, gateway.spend, gateway.work, storage
"""
