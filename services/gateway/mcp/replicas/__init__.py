"""MCP sessions (2025-11-25) that every gateway replica serves: the owning replica runs the
session, the others forward its requests there over Redis, and a replica takes over the
sessions of one that died (see docs/architecture.md, "Gateway replicas")."""
