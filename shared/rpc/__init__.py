"""The Redis RPC channel between sandbox bridges and toolhosts: wire models and the client."""
