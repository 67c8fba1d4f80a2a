"""Storage: everything the gateway keeps (docs/ARCHITECTURE.md, docs/storage.md).

What the runtime calls is at the top: `store.Store` and the units of work it
hands out (`units/`: approvals, delivery, memories, retention, transcripts), the data
types and errors they raise (`errors`, `clock`), `database.Database` (what a
backend is) and `backends.open_database(url)`. The SQL, written once for
every backend, is `sql/`, grouped by table family. The backends: `sqlite/`
(the default: a file) and `postgres/` (a server), each its connection and
single writer, migrations, backup or copy, and a read-only health look.
storage/ imports only itself and the data types of gateway.bus and
agent.messages.
"""
