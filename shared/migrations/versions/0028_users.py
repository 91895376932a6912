"""Who ran it: a person signed in at the OAuth issuer, beside the API key.

``executions.user_id`` and ``audit_log.user_id`` hold the token's subject (``sub``) when a
person's access token made the request (docs/identity.md), as ``audit_log.key_id`` holds
the key when a key did; null otherwise. The partial index serves the executions listing's
filter by user (the dashboard's and ``GET /v1/executions?user=``) without growing for
key-only stacks.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE executions ADD COLUMN user_id text")
    op.execute("ALTER TABLE audit_log ADD COLUMN user_id text")
    op.execute(
        "CREATE INDEX executions_tenant_user_idx ON executions (tenant_id, user_id, created_at DESC)"
        " WHERE user_id IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS executions_tenant_user_idx")
    op.execute("ALTER TABLE audit_log DROP COLUMN IF EXISTS user_id")
    op.execute("ALTER TABLE executions DROP COLUMN IF EXISTS user_id")
