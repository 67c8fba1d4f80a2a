"""Several gateways on one PostgreSQL database (docs/scale-out.md): this
process as a worker of the deployment. `worker.ClusterWorker` registers the
worker, renews it (and so every lease it holds) by a heartbeat, listens for
the other workers' notifications and hands over its leases at a clean stop;
`chats.ChatLeases` says which worker runs a chat's turns (taking a free or dead
lease, forwarding the rest) and gives a turn its fence; `channels.ChannelLeases`
lets one worker hold a channel's one connection and send its outbox.
`setup.ClusterFeature` builds them, or nothing on SQLite.

Public: gateway.cluster.setup, gateway.cluster.chats, gateway.cluster.channels, gateway.cluster.worker
May import: channels.base, gateway.bus, gateway.config, gateway.lifecycle, gateway.ops, storage
"""
