"""Capability versions: new code under an existing name is version n+1 of the same family.

``family_id`` names the first version's id (NULL on a row that starts its family, read
as ``coalesce(family_id, id)``), so learned rows need not know about it; ``version``
counts within the family. Earlier versions stay rows of their own, runnable by id.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE capabilities ADD COLUMN IF NOT EXISTS version integer NOT NULL DEFAULT 1"
    )
    op.execute(
        # A label, not a reference: deleting version 1 must not split its family.
        "ALTER TABLE capabilities ADD COLUMN IF NOT EXISTS family_id uuid"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS capabilities_family_idx "
        "ON capabilities (tenant_id, (coalesce(family_id, id)), version)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS capabilities_family_idx")
    op.execute("ALTER TABLE capabilities DROP COLUMN IF EXISTS family_id")
    op.execute("ALTER TABLE capabilities DROP COLUMN IF EXISTS version")
