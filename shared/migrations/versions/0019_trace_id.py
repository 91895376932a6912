"""Each execution row names the OpenTelemetry trace it ran in (``executions.trace_id``).

Set at submission from the request's span (the caller's ``traceparent`` when it sent one);
NULL when tracing is off, and for rows made before this revision.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE executions ADD COLUMN IF NOT EXISTS trace_id text")


def downgrade() -> None:
    op.execute("ALTER TABLE executions DROP COLUMN IF EXISTS trace_id")
