"""A version of what a run and the result cache read of the tools, so a process keeps it in memory.

Every run read every tool (scope and cache settings, ``shared.tools.store.run_tools``) and
every submission the tools' cache settings, each in a round trip of its own, although they
change only when a toolhost syncs, a server changes state or a cache override is set.
``tools_state.version`` changes in the same transaction as any of those columns (insert,
delete, truncate, or an update that changes one of them; pagerank and availability
included, the rows carry them), and with a server's state or a server added or removed (the
rows carry ``server_state``). A process keeps the rows under the version it read with them
(``shared.versioned.VersionedCache``): the sandbox worker reads the version in its claim's
statement, the gateway in one small read, and a change committed before that read is never
served from memory. A random uuid, as ``search_state``'s: a database made again never
repeats a version a process holds.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-27
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# The columns of ``tools`` a run or the result cache reads (``run_tools``).
_TOOL_COLUMNS = (
    "id, server, name, description, input_schema, schema_hash, available, pagerank, "
    "community, annotations, output_schema, cache_override, pii"
)


def _changed(columns: str) -> str:
    return " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in columns.split(", "))


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS tools_state (
            singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            version    uuid NOT NULL DEFAULT gen_random_uuid()
        )
        """
    )
    op.execute("INSERT INTO tools_state DEFAULT VALUES ON CONFLICT DO NOTHING")
    op.execute(
        """
        CREATE OR REPLACE FUNCTION tools_state_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE tools_state SET version = gen_random_uuid();
            RETURN NULL;
        END
        $$
        """
    )
    for table, columns in (("tools", _TOOL_COLUMNS), ("mcp_servers", "name, state")):
        op.execute(
            f"CREATE TRIGGER {table}_state_added_or_removed AFTER INSERT OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION tools_state_changed()"
        )
        # Only a real change: a sync rewriting unchanged rows keeps the version.
        op.execute(
            f"CREATE TRIGGER {table}_state_updated AFTER UPDATE ON {table} "
            f"FOR EACH ROW WHEN ({_changed(columns)}) EXECUTE FUNCTION tools_state_changed()"
        )
        op.execute(
            f"CREATE TRIGGER {table}_state_truncated AFTER TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION tools_state_changed()"
        )


def downgrade() -> None:
    for table in ("tools", "mcp_servers"):
        for trigger in ("added_or_removed", "updated", "truncated"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_state_{trigger} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS tools_state_changed()")
    op.execute("DROP TABLE IF EXISTS tools_state")
