"""A version for the tools' PageRanks, so a search process can keep them in memory.

Every statement that can change a tool's PageRank (the graph refresh's UPDATE, a tool
inserted with one, a delete) gives ``pagerank_state.version`` a new random value. A
random value, not a counter: a rolled-back transaction's version can never come back
as a committed one. Only the refresh and tool syncs write here, rarely, so a single
row does not make anybody queue (search_state stays the words' version alone).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS pagerank_state (
            singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            version    uuid NOT NULL DEFAULT gen_random_uuid()
        )
        """
    )
    op.execute("INSERT INTO pagerank_state DEFAULT VALUES ON CONFLICT DO NOTHING")
    op.execute(
        """
        CREATE OR REPLACE FUNCTION pagerank_state_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE pagerank_state SET version = gen_random_uuid();
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER tools_pagerank_version
        AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF pagerank ON tools
        FOR EACH STATEMENT EXECUTE FUNCTION pagerank_state_changed()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS tools_pagerank_version ON tools")
    op.execute("DROP FUNCTION IF EXISTS pagerank_state_changed()")
    op.execute("DROP TABLE IF EXISTS pagerank_state")
