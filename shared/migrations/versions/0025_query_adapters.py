"""Consolidated learning: per-tenant query adapters, versioned.

``query_adapters``: every adapter consolidation of a tenant, shipped or not — training and
held-back sizes, the held-back top-1 of the adapter in use (before; the identity when
none) and of the new fit (after), whether it was shipped, seconds. ``matrix`` (float32,
row-major d x d) is kept for the version in use only: shipping a version clears the
older ones' matrices. A search reads the newest shipped row of its tenant
(``shared.search.adapter_store``).

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE query_adapters (
            tenant_id    text NOT NULL,
            version      integer NOT NULL,
            trained_on   integer NOT NULL,
            held_back    integer NOT NULL,
            score_before real,
            score_after  real,
            shipped      boolean NOT NULL,
            matrix       bytea,
            dim          integer NOT NULL,
            last_intent_id bigint NOT NULL DEFAULT 0,
            seconds      real NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, version)
        )
        """
    )
    op.execute(
        "CREATE INDEX query_adapters_shipped ON query_adapters (tenant_id, version DESC) "
        "WHERE shipped"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS query_adapters")
