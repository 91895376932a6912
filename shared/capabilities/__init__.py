"""Capabilities: code normalization and hashing, schema inference, naming, outcome rule, stats."""
