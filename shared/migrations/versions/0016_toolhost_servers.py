"""Each toolhost replica's own view of each MCP server; ``mcp_servers.state`` aggregates them.

Each replica writes its own row (``replica`` is its heartbeat identity
``<hostname>:<pid>``); the server is ready when any live replica has it ready. With one
row per server, the last writer would win: a replica whose stdio server crashed would mark
the server down (and its tools unavailable) while another replica still served it.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS toolhost_servers (
            replica     text NOT NULL,
            server      text NOT NULL,
            state       text NOT NULL,
            last_error  text,
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (server, replica)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS toolhost_servers")
