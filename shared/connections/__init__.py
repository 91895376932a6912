"""People's OAuth connections to servers behind the gateway (docs/upstream-identity.md)."""
