"""Delivery's tables: the durable inbox (unique per platform id), the outbox
(every reply a row before it is sent), dead letters, and each channel's
key/value state.
"""
