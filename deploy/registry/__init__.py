"""The MCP Registry: its API read, a server.json turned into an mcpServers entry."""
