"""The web front end: the packaged single-page UI at `/`, the operator API
under `/api/ops/`, and the storage-backed answers to the WebSocket channel's
queries. Wired by the composition root (gateway/app.py)."""
