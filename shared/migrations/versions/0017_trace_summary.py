"""Each finished execution stores its trace's summary beside the trace.

``trace_summary`` is what every reader needs of a trace (tool calls in order with outcome,
error and timing; capability calls; whether it was truncated), decoded once by
``finish_execution`` (``shared.executions.trace.TraceSummary``) instead of at each read.

No backfill: rows finished before this revision keep a NULL summary, and
``shared.executions.trace.summary_of`` decodes their raw trace when read, as every read
did before. A backfill would have to run today's decoder inside a migration (which must
not change meaning when that code changes later) over every stored trace at start-up.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE executions ADD COLUMN IF NOT EXISTS trace_summary jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE executions DROP COLUMN IF EXISTS trace_summary")
