"""Result cache safety: each L2 entry keeps the generations of the servers it read, and servers
whose invalidation could not complete are blocked until one does.

A hit is served only when its servers are still at the stored generations (an invalidation
bumps them first) and none of them is blocked: an invalidation that failed halfway never
leaves a readable stale entry behind.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE capability_cache "
        "ADD COLUMN IF NOT EXISTS generations jsonb NOT NULL DEFAULT '{}'::jsonb"
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS cache_blocked_servers (
            server     text PRIMARY KEY,
            reason     text NOT NULL DEFAULT '',
            blocked_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS cache_blocked_servers")
    op.execute("ALTER TABLE capability_cache DROP COLUMN IF EXISTS generations")
