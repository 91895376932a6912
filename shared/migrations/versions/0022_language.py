"""The language of an execution and of a capability: ``python`` (every existing row) or ``typescript``.

A capability's code hash already differs per language (shared/capabilities/normalize.py),
so the ``(tenant_id, code_hash)`` key dedups per language without a new constraint.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_TABLES = ("executions", "capabilities")


def upgrade() -> None:
    for table in _TABLES:
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS language text NOT NULL "
            f"DEFAULT 'python' CONSTRAINT {table}_language_check "
            "CHECK (language IN ('python', 'typescript'))"
        )


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS language")
