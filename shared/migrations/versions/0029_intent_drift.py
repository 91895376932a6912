"""Learned search forgets a tool that changed or went away (issue 31, drift).

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

Revision ID: 0029
Revises: 0025
Create Date: 2026-11-27
"""

from alembic import op

revision = "0029"
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


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS intent_tools_tool_deleted ON tools")
    op.execute("DROP TRIGGER IF EXISTS intent_tools_description_changed ON tools")
    op.execute("DROP FUNCTION IF EXISTS intent_tools_forget()")
    op.execute("DROP INDEX IF EXISTS intent_tools_tools_gin")
