"""The SQLite backend: `db` (aiosqlite connection, pragmas, versioned
migrations, one writer with group commits), `migrations`, `backup`,
`health`. It runs the transaction functions of `storage/sql/`.
"""
