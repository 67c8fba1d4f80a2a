"""Long-term memory's tables: memories per user scope, the in-process index
and search over one scope, and maintenance's bookkeeping.
"""
