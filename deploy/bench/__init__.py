"""Benchmarks mounted under `agentcards bench`."""
