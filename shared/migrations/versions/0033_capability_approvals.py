"""Capabilities record the tools whose calls needed a person's approval.

``capabilities.approval_tools`` lists (``server:tool``, sorted) the tools a run of the
capability's code, learned or re-run, had to wait for approval to call (a policy permit
annotated ``@approval("required")``). Search results and the skill export show it, so an
agent knows before it runs the capability that someone will be asked. A tool stays listed
once seen: a later run that skipped the call does not prove the policy changed.

Revision ID: 0033
Revises: 0030
Create Date: 2026-11-28
"""

from alembic import op

revision = "0033"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE capabilities "
        "ADD COLUMN IF NOT EXISTS approval_tools jsonb NOT NULL DEFAULT '[]'::jsonb"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE capabilities DROP COLUMN IF EXISTS approval_tools")
