"""Long-term memory's runtime side (docs/memory.md): `service` is the
MemoryService the memory tools use, `maintenance` and `plan` keep each
user's memory small, `commands` are /memory and /forget, `setup` builds the
parts for the root in one call.

Public: gateway.memory.setup, gateway.memory.commands
May import: agent, gateway.commands, gateway.config, gateway.i18n, gateway.spend, storage
"""
