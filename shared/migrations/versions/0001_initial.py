"""Initial schema: every table named in ARCHITECTURE.md, HNSW and full-text indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Vector columns are sized by the configured embedding model (shared.db.migrate
    # passes it in); a later model change needs a re-embedding migration.
    dim = int(context.config.attributes["vector_dim"])
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        """
        CREATE TABLE mcp_servers (
            name        text PRIMARY KEY,
            transport   text NOT NULL CHECK (transport IN ('stdio', 'http')),
            config      jsonb NOT NULL DEFAULT '{}'::jsonb,
            state       text NOT NULL DEFAULT 'unknown',
            last_error  text,
            tool_count  integer NOT NULL DEFAULT 0,
            updated_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        f"""
        CREATE TABLE tools (
            id           text PRIMARY KEY,          -- 'server:tool'
            server       text NOT NULL,
            name         text NOT NULL,
            description  text NOT NULL DEFAULT '',
            input_schema jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            schema_hash  text NOT NULL,
            embedding    vector({dim}),
            available    boolean NOT NULL DEFAULT true,
            pagerank     double precision NOT NULL DEFAULT 0,
            community    integer,
            search_tsv   tsvector GENERATED ALWAYS AS (
                to_tsvector('english', replace(replace(name, '_', ' '), '-', ' ') || ' ' || description)
            ) STORED,
            updated_at   timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX tools_server_idx ON tools (server)")
    op.execute("CREATE INDEX tools_search_tsv_idx ON tools USING gin (search_tsv)")
    op.execute(
        "CREATE INDEX tools_embedding_hnsw ON tools USING hnsw (embedding vector_cosine_ops)"
    )
    op.execute(
        """
        CREATE TABLE tool_edges (
            src         text NOT NULL,              -- tool id 'server:tool' or 'cap:<uuid>'
            dst         text NOT NULL,
            kind        text NOT NULL CHECK (kind IN ('sequence', 'co_used', 'contains', 'calls')),
            weight      double precision NOT NULL DEFAULT 0,
            count       integer NOT NULL DEFAULT 0,
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (src, dst, kind)
        )
        """
    )
    op.execute("CREATE INDEX tool_edges_dst_idx ON tool_edges (dst)")
    op.execute(
        """
        CREATE TABLE executions (
            id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id        text NOT NULL DEFAULT 'default',
            status           text NOT NULL DEFAULT 'queued' CHECK (status IN (
                                 'queued', 'running', 'succeeded', 'failed', 'timeout',
                                 'cancelled', 'worker_lost', 'rejected')),
            code             text NOT NULL,
            intent           text,
            args             jsonb NOT NULL DEFAULT '{}'::jsonb,
            tools            jsonb,                 -- granted tool ids; null = all available
            timeout_s        double precision NOT NULL,
            idempotency_key  text,
            capability_id    uuid,                  -- set when this run re-ran a capability
            result           jsonb,
            error            jsonb,
            stdout           text NOT NULL DEFAULT '',
            stdout_truncated boolean NOT NULL DEFAULT false,
            trace            jsonb NOT NULL DEFAULT '[]'::jsonb,
            extras           jsonb NOT NULL DEFAULT '{}'::jsonb,  -- capability, suggestions, cache_hit
            worker           text,
            created_at       timestamptz NOT NULL DEFAULT now(),
            started_at       timestamptz,
            finished_at      timestamptz,
            duration_ms      double precision,
            queued_ms        double precision,
            learned_at       timestamptz,
            UNIQUE (tenant_id, idempotency_key)
        )
        """
    )
    op.execute(
        "CREATE INDEX executions_tenant_created_idx ON executions (tenant_id, created_at DESC)"
    )
    op.execute("CREATE INDEX executions_status_idx ON executions (status)")
    op.execute(
        f"""
        CREATE TABLE capabilities (
            id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id         text NOT NULL DEFAULT 'default',
            code_hash         text NOT NULL,
            code              text NOT NULL,
            intent            text NOT NULL,
            intent_embedding  vector({dim}),
            name              text NOT NULL,
            description       text NOT NULL DEFAULT '',
            parameters_schema jsonb NOT NULL DEFAULT '{{"type": "object", "properties": {{}}}}'::jsonb,
            tools_used        jsonb NOT NULL DEFAULT '[]'::jsonb,
            usage_count       integer NOT NULL DEFAULT 0,
            success_count     integer NOT NULL DEFAULT 0,
            failure_count     integer NOT NULL DEFAULT 0,
            success_rate      double precision NOT NULL DEFAULT 0,
            avg_duration_ms   double precision NOT NULL DEFAULT 0,
            source            text NOT NULL DEFAULT 'emergent' CHECK (source IN ('emergent', 'manual')),
            promoted_at       timestamptz,
            last_used         timestamptz,
            cache_config      jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            community         integer,
            pagerank          double precision NOT NULL DEFAULT 0,
            created_at        timestamptz NOT NULL DEFAULT now(),
            updated_at        timestamptz NOT NULL DEFAULT now(),
            UNIQUE (tenant_id, code_hash)
        )
        """
    )
    op.execute("CREATE INDEX capabilities_tenant_name_idx ON capabilities (tenant_id, name)")
    op.execute(
        "CREATE INDEX capabilities_embedding_hnsw ON capabilities "
        "USING hnsw (intent_embedding vector_cosine_ops)"
    )
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
    op.execute(
        """
        CREATE TABLE cache_invalidation_log (
            id             bigserial PRIMARY KEY,
            tenant_id      text NOT NULL DEFAULT 'default',
            capability_id  uuid,
            tool_id        text,
            reason         text NOT NULL,
            entries        integer NOT NULL DEFAULT 0,
            created_at     timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE adaptive_thresholds (
            tenant_id   text NOT NULL DEFAULT 'default',
            context     text NOT NULL,
            value       double precision NOT NULL,
            samples     jsonb NOT NULL DEFAULT '[]'::jsonb,  -- sliding window of outcomes
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, context)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE adaptive_threshold_changes (
            id          bigserial PRIMARY KEY,
            tenant_id   text NOT NULL DEFAULT 'default',
            context     text NOT NULL,
            old_value   double precision NOT NULL,
            new_value   double precision NOT NULL,
            reason      text NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE suggestion_feedback (
            id            bigserial PRIMARY KEY,
            tenant_id     text NOT NULL DEFAULT 'default',
            execution_id  uuid,
            kind          text NOT NULL,            -- 'capability' | 'tool'
            suggested_id  text NOT NULL,
            score         double precision NOT NULL,
            reason        text NOT NULL DEFAULT '',
            used          boolean,
            created_at    timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE api_keys (
            id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id   text NOT NULL DEFAULT 'default',
            name        text NOT NULL,
            key_hash    text NOT NULL UNIQUE,
            created_at  timestamptz NOT NULL DEFAULT now(),
            revoked_at  timestamptz
        )
        """
    )
    op.execute(
        f"""
        CREATE TABLE embedding_cache (
            text_hash   text NOT NULL,
            model       text NOT NULL,
            embedding   vector({dim}) NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (model, text_hash)
        )
        """
    )


def downgrade() -> None:
    for table in (
        "embedding_cache",
        "api_keys",
        "suggestion_feedback",
        "adaptive_threshold_changes",
        "adaptive_thresholds",
        "cache_invalidation_log",
        "capability_cache",
        "capabilities",
        "executions",
        "tool_edges",
        "tools",
        "mcp_servers",
    ):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
