"""The terminal client (`picobot agent`): `main` runs it, `link` is its
WebSocket connection, `state` its saved chat id, `tui` the interactive
screen.
"""
