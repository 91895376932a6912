"""Policy as code: Cedar policies decide every tool call, submission and read (docs/policy.md)."""
