"""The runtime: everything between the channels and the agent, as feature
packages (docs/ARCHITECTURE.md). At the top: `app` (the composition root, the
one module that wires every part), `bus` (message types and the bus; a
leaf), `work` (the types the turn pipeline shares), `clock`, `commands` (the
command registry), `http` (the aiohttp app and its host guard), `lifecycle`
(services and readiness) and `scheduling` (the scheduler's view of the
gateway). Each package's `__init__` names what it owns, its public modules
(`Public:`, the only ones other packages import) and what it may import
(`May import:`); tests/test_architecture.py holds every package to both.
"""
