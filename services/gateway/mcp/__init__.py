"""The gateway's MCP front end: the server, its tools, prompts, resources and log messages, over ops/."""
