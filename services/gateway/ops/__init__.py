"""The operations both front ends (rest/, mcp/) call: each written once, importing neither."""
