"""Direct tool calls without a sandbox: their records, written off the hot path."""
