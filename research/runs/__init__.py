"""Experiments on the cost of an execution (research/README.md)."""
