"""The units of work `Store` hands out by feature (`Store.approvals`,
`Store.memories`, `Store.retention`, `Store.transcripts`): named async
operations the runtime awaits, each one transaction of the backend's SQL.
"""
