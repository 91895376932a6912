"""Learning in batches: find open suggestions by what they suggested, not by a scan.

Every ingested execution records the suggestions it was shown, and every
ingestion looks up the open ones (``used IS NULL``) of the tools and capabilities
it used, within the last hour. Without an index that lookup scans the whole,
ever-growing table once per batch.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS suggestion_feedback_open_idx "
        "ON suggestion_feedback (tenant_id, suggested_id, created_at) WHERE used IS NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS suggestion_feedback_open_idx")
