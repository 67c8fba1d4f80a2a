"""Storage: everything the gateway keeps (docs/ARCHITECTURE.md).

What the runtime calls is at the top: `store.Store` and the units of work it
hands out (`units/`: approvals, memories, retention, transcripts), the data
types and errors they raise (`errors`, `clock`). The SQLite backend is
`sqlite/`: the connection and its single writer (`db`), the migrations,
backup and a read-only health look, and the SQL itself grouped by table
family. A second backend is a sibling folder of `sqlite/`. storage/ imports
only itself and the data types of gateway.bus and agent.messages.
"""
