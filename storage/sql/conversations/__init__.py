"""Conversations' tables: sessions and their bindings, messages by segment
(and the window a turn reads), a turn's writes, history compaction,
sub-agent transcripts, sent session messages, session housekeeping, the
chat commands' changes and the console's reads of every conversation.
"""
