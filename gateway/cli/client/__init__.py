"""The terminal client (`picobot agent`): `main` runs it, `target` finds the
gateway (URL and token: the command line, else the gateway's config), `link`
is its WebSocket connection, `state` its saved default chat id, `tui` the
interactive screen, `render` how replies look there (Markdown, links, tool
lines), `oneshot` the `-m` mode and its exit codes.
"""
