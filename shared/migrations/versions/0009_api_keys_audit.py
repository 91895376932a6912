"""API keys carry their tenant's limits and tool patterns; an append-only audit log.

``api_keys`` (created empty in 0001) gains the shown prefix, tool patterns, per-key
limits and the admin flag. ``audit_log`` records who did what: one row per execution,
search and key change; arguments are stored as a sha256, never as given.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE api_keys
            ADD COLUMN IF NOT EXISTS key_prefix         text NOT NULL DEFAULT '',
            ADD COLUMN IF NOT EXISTS tool_patterns      text[],     -- null: every tool
            ADD COLUMN IF NOT EXISTS executions_per_min integer,    -- null: no limit
            ADD COLUMN IF NOT EXISTS tool_calls_per_min integer,
            ADD COLUMN IF NOT EXISTS max_concurrent     integer,
            ADD COLUMN IF NOT EXISTS admin              boolean NOT NULL DEFAULT false
        """
    )
    # "Is any key active?" is asked on every unauthenticated request (cached for seconds).
    op.execute(
        "CREATE INDEX IF NOT EXISTS api_keys_active_idx ON api_keys (tenant_id) "
        "WHERE revoked_at IS NULL"
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS audit_log (
            id            bigserial PRIMARY KEY,
            created_at    timestamptz NOT NULL DEFAULT now(),
            tenant_id     text NOT NULL,
            key_id        uuid,                 -- the acting key; null when no key is in use
            action        text NOT NULL CHECK (action IN ('execute', 'capability_execute',
                              'search', 'key_create', 'key_revoke', 'cache_clear',
                              'tool_call_refused')),
            execution_id  uuid,
            args_hash     text,                 -- sha256 of the canonical JSON arguments
            details       jsonb NOT NULL DEFAULT '{}'::jsonb,
            status        text,                 -- an execution's terminal status
            tools         jsonb,                -- [{tool, ok, error_type}] from the finished trace
            finished_at   timestamptz
        )
        """
    )
    op.execute("CREATE INDEX IF NOT EXISTS audit_log_tenant_idx ON audit_log (tenant_id, id DESC)")
    op.execute(
        "CREATE INDEX IF NOT EXISTS audit_log_execution_idx ON audit_log (execution_id) "
        "WHERE execution_id IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS audit_log")
    op.execute("DROP INDEX IF EXISTS api_keys_active_idx")
    op.execute(
        """
        ALTER TABLE api_keys
            DROP COLUMN IF EXISTS key_prefix,
            DROP COLUMN IF EXISTS tool_patterns,
            DROP COLUMN IF EXISTS executions_per_min,
            DROP COLUMN IF EXISTS tool_calls_per_min,
            DROP COLUMN IF EXISTS max_concurrent,
            DROP COLUMN IF EXISTS admin
        """
    )
