"""`agentcards connect`: MCP clients configured to reach this gateway."""
