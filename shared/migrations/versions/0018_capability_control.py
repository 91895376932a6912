"""Agents and operators control what is learned: a run may ask not to be learned from, and a
capability may be disabled.

``executions.learn`` is the submission's ``"learn"`` (default true): false, the run is never
evidence for a capability (none is created from it, no success is counted).
``capabilities.disabled_at`` is set while an operator has the capability disabled: it is
neither matched, suggested nor offered by search, and running it is refused
(``capability_disabled``) until it is enabled again.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE executions ADD COLUMN IF NOT EXISTS learn boolean NOT NULL DEFAULT true"
    )
    op.execute("ALTER TABLE capabilities ADD COLUMN IF NOT EXISTS disabled_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE capabilities DROP COLUMN IF EXISTS disabled_at")
    op.execute("ALTER TABLE executions DROP COLUMN IF EXISTS learn")
