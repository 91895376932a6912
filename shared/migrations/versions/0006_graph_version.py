"""A version for the tool graph, so a search process can keep the graph in memory.

Every statement that writes ``tool_edges`` adds one to its own backend's row of
``tool_edges_writes``; the graph version is the sum. The count is transactional (a
reader sees it move exactly when the write commits, never before), and concurrent
writers touch different rows, so learning workers never queue on it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS tool_edges_writes (
            backend_pid  integer PRIMARY KEY,
            writes       bigint NOT NULL
        )
        """
    )
    op.execute(
        """
        CREATE OR REPLACE FUNCTION tool_edges_written() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO tool_edges_writes (backend_pid, writes) VALUES (pg_backend_pid(), 1)
            ON CONFLICT (backend_pid) DO UPDATE SET writes = tool_edges_writes.writes + 1;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER tool_edges_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
        ON tool_edges FOR EACH STATEMENT EXECUTE FUNCTION tool_edges_written()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS tool_edges_version ON tool_edges")
    op.execute("DROP FUNCTION IF EXISTS tool_edges_written()")
    op.execute("DROP TABLE IF EXISTS tool_edges_writes")
