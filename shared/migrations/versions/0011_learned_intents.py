"""Search and matching that learn: past intents vote for their tools; capabilities keep their phrasings.

``intent_tools``: one row per finished execution that had an intent and called tools —
the intent's embedding, the tools whose calls succeeded (in a succeeded run) and those
whose calls failed. A search's nearest past intents vote for their tools (HNSW).

``capability_aliases``: the other distinct intents a capability was run or matched with
(its own ``intent`` stays on the capability); matching scores a capability by the best
of its intent and aliases.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from alembic import context, op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes["vector_dim"])
    op.execute(
        f"""
        CREATE TABLE intent_tools (
            id               bigserial PRIMARY KEY,
            tenant_id        text NOT NULL,
            execution_id     uuid UNIQUE,
            intent           text NOT NULL,
            intent_embedding vector({dim}) NOT NULL,
            tools_ok         text[] NOT NULL DEFAULT '{{}}',
            tools_failed     text[] NOT NULL DEFAULT '{{}}',
            created_at       timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "CREATE INDEX intent_tools_embedding_hnsw ON intent_tools "
        "USING hnsw (intent_embedding vector_cosine_ops)"
    )
    op.execute("CREATE INDEX intent_tools_tenant_idx ON intent_tools (tenant_id, created_at)")
    op.execute(
        f"""
        CREATE TABLE capability_aliases (
            id               bigserial PRIMARY KEY,
            capability_id    uuid NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
            tenant_id        text NOT NULL,
            intent           text NOT NULL,
            intent_embedding vector({dim}) NOT NULL,
            created_at       timestamptz NOT NULL DEFAULT now(),
            UNIQUE (capability_id, intent)
        )
        """
    )
    op.execute(
        "CREATE INDEX capability_aliases_embedding_hnsw ON capability_aliases "
        "USING hnsw (intent_embedding vector_cosine_ops)"
    )
    op.execute(
        "CREATE INDEX capability_aliases_capability_idx ON capability_aliases (capability_id)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS capability_aliases")
    op.execute("DROP TABLE IF EXISTS intent_tools")
