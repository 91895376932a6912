"""Consolidated learning: per-tenant tool vectors, versioned (issue 31).

``tool_vectors``: the current version of a tenant's tool vectors, one row per tool the
tenant ran successfully — the vector (description embedding mixed with the mean of the
intents it served, ``shared.search.tool_vectors``), how many intents it was learned from,
and the md5 of the description it was mixed with: a search uses a row only while the
tool exists with that same description (a changed or removed tool gets no stale vector).

``tool_vector_versions``: every consolidation of a tenant, shipped or not — training and
held-back sizes, the held-back top-1 of the current version (before) and of the new fit
(after), and the newest intent it saw (the next consolidation waits for newer ones).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26
"""

from alembic import context, op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes["vector_dim"])
    op.execute(
        """
        CREATE TABLE tool_vector_versions (
            tenant_id      text NOT NULL,
            version        integer NOT NULL,
            trained_on     integer NOT NULL,
            held_back      integer NOT NULL,
            score_before   real,
            score_after    real,
            shipped        boolean NOT NULL,
            last_intent_id bigint NOT NULL,
            seconds        real NOT NULL,
            created_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, version)
        )
        """
    )
    op.execute(
        f"""
        CREATE TABLE tool_vectors (
            tenant_id       text NOT NULL,
            tool_id         text NOT NULL,
            version         integer NOT NULL,
            vector          vector({dim}) NOT NULL,
            intents         integer NOT NULL,
            description_md5 text NOT NULL,
            PRIMARY KEY (tenant_id, tool_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX tool_vectors_vector_hnsw ON tool_vectors "
        "USING hnsw (vector vector_cosine_ops)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS tool_vectors")
    op.execute("DROP TABLE IF EXISTS tool_vector_versions")
