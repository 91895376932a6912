"""MCP tools as the gateway knows them: the catalog, the tools table, each server's state."""
