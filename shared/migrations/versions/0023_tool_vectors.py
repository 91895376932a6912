"""Consolidated learning: per-tenant tool vectors, versioned.

``tool_vectors``: the current version of a tenant's tool vectors, one row per tool the
tenant ran successfully — the vector (description embedding mixed with the mean of the
intents it served, ``shared.search.tool_vectors``), how many intents it was learned from,
and the md5 of the description it was mixed with. A row goes with its tool (foreign key,
on delete cascade) and when its tool's description changes (trigger): a changed or
removed tool gets no stale vector, and a search needs no join to know it.

``tool_vector_versions``: every consolidation of a tenant, shipped or not — training and
held-back sizes, the held-back top-1 of the current version (before) and of the new fit
(after), the newest intent it saw and how many runs it read (the next consolidation waits
for a newer run, or for a run taken back: ``shared.learning.unteach``).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26
"""

from alembic import context, op

revision = "0023"
down_revision = "0022"
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
            runs_seen      integer NOT NULL DEFAULT 0,
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
            tool_id         text NOT NULL REFERENCES tools (id) ON DELETE CASCADE,
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
    op.execute(
        """
        CREATE FUNCTION tool_vectors_forget() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM tool_vectors WHERE tool_id = NEW.id;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER tool_vectors_description_changed AFTER UPDATE OF description ON tools "
        "FOR EACH ROW WHEN (OLD.description IS DISTINCT FROM NEW.description) "
        "EXECUTE FUNCTION tool_vectors_forget()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS tool_vectors_description_changed ON tools")
    op.execute("DROP FUNCTION IF EXISTS tool_vectors_forget()")
    op.execute("DROP TABLE IF EXISTS tool_vectors")
    op.execute("DROP TABLE IF EXISTS tool_vector_versions")
