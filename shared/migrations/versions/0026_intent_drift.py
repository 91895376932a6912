"""Learned search forgets a tool that changed or went away.

A past run's intent votes for the tools it called (``intent_tools.tools_ok`` /
``tools_failed``) and trains the tenant's query adapter. When a tool's description changes
(its server now says it does something else) or the tool is deleted (its server stopped
listing it), those runs are evidence about a tool that no longer exists as it was: the
trigger takes the tool out of every run's arrays, so it gets no stale vote from the next
search on, and the run count the consolidation compares changes, so the next pass refits
the adapter without it. The rest of each run (its other tools) keeps teaching. A tool that
is merely unavailable (its server is down) keeps its runs: the search already drops it
while it is down.

The expression index (GIN over both arrays) keeps the trigger's update from scanning
every run of every tenant.

Capability phrasings join the same learned space: a capability's intent and each of its
aliases (``capability_aliases``: the phrasings its runs and accepted matches were asked
with, or those a person gave it) is a row of ``intent_tools`` for the capability's tools
(``tools_used`` that exist), with no execution: the search's vote and the consolidation's
adapter read them as they read runs. The row goes with its alias or capability (foreign
keys, on delete cascade), follows an edited intent or tool list (triggers), and is not
written when a run of the tenant already holds that exact phrasing (it teaches through the
run; the hash index on ``intent`` keeps that check to one lookup).

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX intent_tools_tools_gin ON intent_tools USING gin ((tools_ok || tools_failed))"
    )
    op.execute(
        """
        CREATE FUNCTION intent_tools_forget() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE intent_tools
               SET tools_ok = array_remove(tools_ok, OLD.id),
                   tools_failed = array_remove(tools_failed, OLD.id)
             WHERE (tools_ok || tools_failed) @> ARRAY[OLD.id];
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER intent_tools_description_changed AFTER UPDATE OF description ON tools "
        "FOR EACH ROW WHEN (OLD.description IS DISTINCT FROM NEW.description) "
        "EXECUTE FUNCTION intent_tools_forget()"
    )
    op.execute(
        "CREATE TRIGGER intent_tools_tool_deleted AFTER DELETE ON tools "
        "FOR EACH ROW EXECUTE FUNCTION intent_tools_forget()"
    )

    _phrasings()


# One row per phrasing: (capability, alias or NULL for the capability's own intent).
PHRASING_SQL = """
INSERT INTO intent_tools (tenant_id, intent, intent_embedding, tools_ok, capability_id,
                          alias_id)
SELECT c.tenant_id, p_intent, p_embedding,
       ARRAY(SELECT t FROM jsonb_array_elements_text(c.tools_used) AS t
              WHERE EXISTS (SELECT 1 FROM tools WHERE id = t)),
       c.id, p_alias
  FROM capabilities c
 WHERE c.id = p_capability AND p_embedding IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM intent_tools r
                    WHERE r.intent = p_intent AND r.tenant_id = c.tenant_id
                      AND r.execution_id IS NOT NULL)
"""


def _phrasings() -> None:
    op.execute(
        "ALTER TABLE intent_tools "
        "ADD COLUMN capability_id uuid REFERENCES capabilities (id) ON DELETE CASCADE, "
        "ADD COLUMN alias_id bigint REFERENCES capability_aliases (id) ON DELETE CASCADE"
    )
    op.execute("CREATE INDEX intent_tools_intent_hash ON intent_tools USING hash (intent)")
    op.execute(
        "CREATE INDEX intent_tools_capability_idx ON intent_tools (capability_id) "
        "WHERE capability_id IS NOT NULL"
    )
    op.execute(
        f"""
        CREATE FUNCTION intent_tools_phrasing(p_capability uuid, p_alias bigint,
                                              p_intent text, p_embedding vector)
        RETURNS void LANGUAGE sql AS $$ {PHRASING_SQL} $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION intent_tools_alias_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM intent_tools_phrasing(NEW.capability_id, NEW.id, NEW.intent,
                                          NEW.intent_embedding);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER intent_tools_alias_added AFTER INSERT ON capability_aliases "
        "FOR EACH ROW EXECUTE FUNCTION intent_tools_alias_added()"
    )
    op.execute(
        """
        CREATE FUNCTION intent_tools_capability_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' OR OLD.intent IS DISTINCT FROM NEW.intent
               OR OLD.intent_embedding IS DISTINCT FROM NEW.intent_embedding THEN
                DELETE FROM intent_tools WHERE capability_id = NEW.id AND alias_id IS NULL;
                PERFORM intent_tools_phrasing(NEW.id, NULL, NEW.intent, NEW.intent_embedding);
            END IF;
            IF TG_OP = 'UPDATE' AND OLD.tools_used IS DISTINCT FROM NEW.tools_used THEN
                UPDATE intent_tools
                   SET tools_ok = ARRAY(SELECT t FROM jsonb_array_elements_text(NEW.tools_used) t
                                         WHERE EXISTS (SELECT 1 FROM tools WHERE id = t))
                 WHERE capability_id = NEW.id;
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER intent_tools_capability_changed "
        "AFTER INSERT OR UPDATE OF intent, intent_embedding, tools_used ON capabilities "
        "FOR EACH ROW EXECUTE FUNCTION intent_tools_capability_changed()"
    )
    # The capabilities and aliases that exist already.
    op.execute("SELECT intent_tools_phrasing(id, NULL, intent, intent_embedding) FROM capabilities")
    op.execute(
        "SELECT intent_tools_phrasing(capability_id, id, intent, intent_embedding) "
        "FROM capability_aliases ORDER BY id"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS intent_tools_capability_changed ON capabilities")
    op.execute("DROP FUNCTION IF EXISTS intent_tools_capability_changed()")
    op.execute("DROP TRIGGER IF EXISTS intent_tools_alias_added ON capability_aliases")
    op.execute("DROP FUNCTION IF EXISTS intent_tools_alias_added()")
    op.execute("DROP FUNCTION IF EXISTS intent_tools_phrasing(uuid, bigint, text, vector)")
    op.execute("DELETE FROM intent_tools WHERE execution_id IS NULL AND capability_id IS NOT NULL")
    op.execute(
        "ALTER TABLE intent_tools DROP COLUMN IF EXISTS alias_id, "
        "DROP COLUMN IF EXISTS capability_id"
    )
    op.execute("DROP INDEX IF EXISTS intent_tools_intent_hash")
    op.execute("DROP TRIGGER IF EXISTS intent_tools_tool_deleted ON tools")
    op.execute("DROP TRIGGER IF EXISTS intent_tools_description_changed ON tools")
    op.execute("DROP FUNCTION IF EXISTS intent_tools_forget()")
    op.execute("DROP INDEX IF EXISTS intent_tools_tools_gin")
