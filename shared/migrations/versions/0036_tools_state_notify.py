"""The transaction that changes ``tools_state.version`` (0027) also notifies
``agentcards_tools_state``, so a process holding the tools in memory hears of the change
(``shared/tools/watch.py``) instead of reading the version before each use.

The payload is empty: a transaction that changes many rows sends one notification (Postgres
delivers a channel's identical notifications of one transaction once), and a listener reads
the version itself, so notifications read out of order never leave it behind.

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-29
"""

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

CHANNEL = "agentcards_tools_state"  # shared.tools.watch.CHANNEL (a migration stands alone)


def upgrade() -> None:
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION tools_state_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE tools_state SET version = gen_random_uuid();
            PERFORM pg_notify('{CHANNEL}', '');
            RETURN NULL;
        END
        $$
        """
    )


def downgrade() -> None:
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
