"""Search speed at 10k tools / 100k edges: in-line embeddings, covering edge indexes, a word version.

- ``tools.embedding`` was stored out of line (pgvector's default storage, EXTERNAL):
  every similarity the search computes for an HNSW hit read the TOAST table too.
  MAIN keeps the vector in the row and moves the long text columns out instead.
- Graph signals walk the undirected neighbours of a few nodes (weight > 0, no self
  loops); partial indexes holding exactly those edges answer from the index alone.
- ``search_state.tools_version`` changes whenever a tool's searchable words can have
  changed (insert, delete, truncate, or a different ``search_doc``), so a process can
  keep the lexical index in memory and know at once when it is stale.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_EDGE = "WHERE weight > 0 AND dst <> src"


def upgrade() -> None:
    op.execute("ALTER TABLE tools ALTER COLUMN embedding SET STORAGE MAIN")
    # Storage applies to values written from now on: rewrite the existing vectors.
    op.execute("UPDATE tools SET embedding = embedding::real[]::vector WHERE embedding IS NOT NULL")
    op.execute(
        "CREATE INDEX IF NOT EXISTS tool_edges_out_idx ON tool_edges (src) "
        f"INCLUDE (dst, kind, weight) {_EDGE}"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS tool_edges_in_idx ON tool_edges (dst) "
        f"INCLUDE (src, kind, weight) {_EDGE}"
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS search_state (
            singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            tools_version  uuid NOT NULL DEFAULT gen_random_uuid()
        )
        """
    )
    op.execute("INSERT INTO search_state DEFAULT VALUES ON CONFLICT DO NOTHING")
    op.execute(
        """
        CREATE OR REPLACE FUNCTION search_state_tools_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE search_state SET tools_version = gen_random_uuid();
            RETURN NULL;
        END
        $$
        """
    )
    # Row triggers, so a sync that rewrites unchanged tools (or deletes none) keeps the
    # version; pagerank and availability updates never touch it.
    op.execute(
        """
        CREATE TRIGGER tools_words_added_or_removed AFTER INSERT OR DELETE ON tools
        FOR EACH ROW EXECUTE FUNCTION search_state_tools_changed()
        """
    )
    op.execute(
        """
        CREATE TRIGGER tools_words_updated AFTER UPDATE OF name, server, description ON tools
        FOR EACH ROW WHEN (OLD.search_doc IS DISTINCT FROM NEW.search_doc)
        EXECUTE FUNCTION search_state_tools_changed()
        """
    )
    op.execute(
        """
        CREATE TRIGGER tools_words_truncated AFTER TRUNCATE ON tools
        FOR EACH STATEMENT EXECUTE FUNCTION search_state_tools_changed()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS tools_words_truncated ON tools")
    op.execute("DROP TRIGGER IF EXISTS tools_words_updated ON tools")
    op.execute("DROP TRIGGER IF EXISTS tools_words_added_or_removed ON tools")
    op.execute("DROP FUNCTION IF EXISTS search_state_tools_changed()")
    op.execute("DROP TABLE IF EXISTS search_state")
    op.execute("DROP INDEX IF EXISTS tool_edges_in_idx")
    op.execute("DROP INDEX IF EXISTS tool_edges_out_idx")
    op.execute("ALTER TABLE tools ALTER COLUMN embedding SET STORAGE EXTERNAL")
