"""Who is calling: API keys, the principal a request runs as, and tool allow-lists."""
