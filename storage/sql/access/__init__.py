"""Who may reach what, durably: pairings, the owners of WebSocket chats, and
the rate events that limits count (session messages, refusal replies).
"""
