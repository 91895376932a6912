"""The result cache: tool annotations and cache overrides, the capability cache's columns, the log.

``tools`` keeps each tool's MCP ``annotations`` and ``output_schema`` and the operator's
``cache_override`` (the ``agentcards.cache`` block of its server); ``capability_cache``
(reserved in 0001) gets the columns the cache reads; ``cache_invalidation_log`` names its
columns after what it records (trigger, scope, count).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE tools
            ADD COLUMN IF NOT EXISTS annotations jsonb NOT NULL DEFAULT '{}'::jsonb,
            ADD COLUMN IF NOT EXISTS output_schema jsonb,
            ADD COLUMN IF NOT EXISTS cache_override jsonb NOT NULL DEFAULT '{}'::jsonb
        """
    )
    # The reserved table never held rows; recreate it with the shape the cache uses.
    op.execute("DROP TABLE IF EXISTS capability_cache")
    op.execute(
        """
        CREATE TABLE capability_cache (
            id                  bigserial PRIMARY KEY,
            tenant_id           text NOT NULL DEFAULT 'default',
            capability_id       uuid NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
            params_hash         text NOT NULL,
            result              jsonb,
            stdout              text NOT NULL DEFAULT '',
            tools_used          text[] NOT NULL DEFAULT '{}',
            servers             text[] NOT NULL DEFAULT '{}',
            source_execution_id uuid,
            hit_count           integer NOT NULL DEFAULT 0,
            created_at          timestamptz NOT NULL DEFAULT now(),
            expires_at          timestamptz NOT NULL,
            UNIQUE (tenant_id, capability_id, params_hash)
        )
        """
    )
    # Invalidation finds entries by the tools and servers they used; expiry by time.
    op.execute("CREATE INDEX capability_cache_tools_idx ON capability_cache USING gin (tools_used)")
    op.execute("CREATE INDEX capability_cache_servers_idx ON capability_cache USING gin (servers)")
    op.execute("CREATE INDEX capability_cache_expires_idx ON capability_cache (expires_at)")
    op.execute("ALTER TABLE cache_invalidation_log RENAME COLUMN reason TO trigger")
    op.execute('ALTER TABLE cache_invalidation_log RENAME COLUMN entries TO "count"')
    op.execute(
        "ALTER TABLE cache_invalidation_log ADD COLUMN IF NOT EXISTS scope text NOT NULL DEFAULT ''"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS cache_invalidation_log_tenant_idx "
        "ON cache_invalidation_log (tenant_id, created_at DESC)"
    )
    # Consecutive failures of a capability are read from its latest runs.
    op.execute(
        "CREATE INDEX IF NOT EXISTS executions_capability_finished_idx "
        "ON executions (capability_id, finished_at DESC) WHERE capability_id IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS executions_capability_finished_idx")
    op.execute("DROP INDEX IF EXISTS cache_invalidation_log_tenant_idx")
    op.execute("ALTER TABLE cache_invalidation_log DROP COLUMN IF EXISTS scope")
    op.execute('ALTER TABLE cache_invalidation_log RENAME COLUMN "count" TO entries')
    op.execute("ALTER TABLE cache_invalidation_log RENAME COLUMN trigger TO reason")
    op.execute("DROP TABLE IF EXISTS capability_cache")
    op.execute(
        """
        CREATE TABLE capability_cache (
            id             bigserial PRIMARY KEY,
            tenant_id      text NOT NULL DEFAULT 'default',
            capability_id  uuid NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
            args_hash      text NOT NULL,
            result         jsonb,
            hits           integer NOT NULL DEFAULT 0,
            created_at     timestamptz NOT NULL DEFAULT now(),
            expires_at     timestamptz,
            UNIQUE (tenant_id, capability_id, args_hash)
        )
        """
    )
    for column in ("cache_override", "output_schema", "annotations"):
        op.execute(f"ALTER TABLE tools DROP COLUMN IF EXISTS {column}")
