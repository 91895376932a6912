"""Who taught a capability: the people whose runs it was learned or updated from.

One row per (capability, user): how many of their runs taught it and when the first and
the last did. Written by learning in the transaction that stamps the run ``learned_at``,
so a run counts once however often its message is delivered. Rows go with the capability.
Runs learned before this table existed are counted from their executions (the run's
``extras.capability`` says which capability it created or updated).

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE capability_learners (
            capability_id  uuid NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
            user_id        text NOT NULL,
            runs           integer NOT NULL DEFAULT 1,
            first_run_at   timestamptz NOT NULL DEFAULT now(),
            last_run_at    timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (capability_id, user_id)
        )
        """
    )
    op.execute(
        """
        INSERT INTO capability_learners (capability_id, user_id, runs, first_run_at, last_run_at)
        SELECT c.id, e.user_id, count(*), min(e.created_at), max(e.created_at)
          FROM executions AS e
          JOIN capabilities AS c ON c.id::text = e.extras->'capability'->>'id'
         WHERE e.user_id IS NOT NULL AND e.learned_at IS NOT NULL
           AND e.extras->'capability'->>'status' IN ('created', 'updated')
         GROUP BY c.id, e.user_id
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS capability_learners")
