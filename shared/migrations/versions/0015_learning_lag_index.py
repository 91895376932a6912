"""Finished executions not yet learned from, indexed by when they finished.

/healthz reads the learning lag (how many finished runs wait for ingestion and how long
the oldest has waited) on every call; the partial index holds only the rows still
waiting, so the read stays an index scan of a few rows however long the history is.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS executions_learning_pending_idx ON executions (finished_at) "
        "WHERE learned_at IS NULL AND finished_at IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS executions_learning_pending_idx")
