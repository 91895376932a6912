"""Capability matching: adaptive thresholds, semantic * reliability matching, argument checks."""
