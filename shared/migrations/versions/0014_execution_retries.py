"""Executions submitted with ``"retry": "safe"`` are re-run when their worker dies.

``retry`` is what the client allowed (``never`` or ``safe``), ``attempts`` how many
times a worker claimed the row, ``retries`` one entry per lost attempt that was re-run
(attempt, worker, reason, when), ``requeued_at`` when it went back to the queue (the
queue-wait limit counts from then, not from the submission).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE executions
          ADD COLUMN IF NOT EXISTS retry text NOT NULL DEFAULT 'never'
              CHECK (retry IN ('never', 'safe')),
          ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 0,
          ADD COLUMN IF NOT EXISTS retries jsonb NOT NULL DEFAULT '[]'::jsonb,
          ADD COLUMN IF NOT EXISTS requeued_at timestamptz
        """
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE executions DROP COLUMN IF EXISTS requeued_at, "
        "DROP COLUMN IF EXISTS retries, DROP COLUMN IF EXISTS attempts, "
        "DROP COLUMN IF EXISTS retry"
    )
