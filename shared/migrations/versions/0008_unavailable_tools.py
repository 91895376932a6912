"""A partial index of the unavailable tools, so every search can skip them for ~nothing.

Tools of a server that is down or left the configuration stay in ``tools`` (their ids
live on in traces, edges and capabilities) with ``available = false``. A search reads
their ids with the query's words; the index holds only those rows, normally none.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS tools_unavailable_idx ON tools (id) WHERE NOT available")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS tools_unavailable_idx")
