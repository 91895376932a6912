"""A real MCP server (stdio, the mcp SDK) for the privacy tests: a CRM holding personal
data and secrets, and a recorder that writes what it receives to ``PII_TEST_DIR/received``.

The planted values are here only (never in the code a test submits), so finding one
anywhere in Postgres, Redis or a log means it leaked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("pii-test")

CUSTOMERS = [
    {
        "id": "CUST-000042",
        "name": "Jane Doe",
        "email": "jane.doe@acme-customers.example",
        "phone": "+1 415-555-2671",
        "card": "4111 1111 1111 1111",
        "iban": "DE89 3704 0044 0532 0130 00",
        "ssn": "536-22-1234",
        "api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "created": "2024-01-15T10:30:00Z",
        "balance": "$1,299.99",
    },
    {
        "id": "CUST-000043",
        "name": "John Roe",
        "email": "john.roe@acme-customers.example",
        "phone": "+44 7911 123456",
        "card": "5555-5555-5555-4444",
        "iban": "GB82WEST12345698765432",
        "ssn": "536-90-4399",
        "api_key": "AKIAIOSFODNN7EXAMPLE",
        "created": "2024-02-01T08:00:00Z",
        "balance": "$12.50",
    },
]
PLANTED = [
    v for c in CUSTOMERS for k, v in c.items() if k not in {"id", "name", "created", "balance"}
]


@server.tool()
def customers() -> list[dict[str, str]]:
    """Every customer record."""
    return CUSTOMERS


@server.tool()
def customer_by_email(email: str) -> dict[str, str]:
    """One customer by e-mail; an unknown e-mail fails naming it."""
    for customer in CUSTOMERS:
        if customer["email"] == email:
            return customer
    raise ToolError(f"no customer with e-mail {email}")


@server.tool()
async def sync_customers(ctx: Context) -> str:
    """Reports progress naming a customer, then answers."""
    await ctx.report_progress(1, 2, f"syncing {CUSTOMERS[0]['email']}")
    return "synced"


@server.tool()
def record(value: str) -> str:
    """Write ``value`` to the received file (one JSON line each)."""
    with (Path(os.environ["PII_TEST_DIR"]) / "received").open("a") as out:
        out.write(json.dumps(value) + "\n")
    return "recorded"


@server.tool()
def export(megabytes: int) -> str:
    """A text of about ``megabytes`` MB with a customer's e-mail in every kilobyte."""
    line = ("x" * 980) + f" {CUSTOMERS[0]['email']}\n"
    return line * (megabytes * 1024 * 1024 // len(line))


if __name__ == "__main__":
    Path(os.environ["PII_TEST_DIR"]).mkdir(parents=True, exist_ok=True)
    server.run()
