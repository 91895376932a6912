"""The model a database's vectors were made with, so a process configured otherwise refuses to start.

``embedding_model`` holds one row: the model's name and the vectors' dimension. A database
made by this migration's first run (0001 sizes the columns by the configured model) records
the configured model; an older one records it too when the vector columns have its
dimension, and an empty name (a model nobody recorded) when they do not, so the check at
start (``shared.embeddings.stored``) asks for ``agentcards reembed`` instead of mixing
vectors of two models. ``reembed`` rewrites the row.

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-28
"""

from alembic import context, op
from sqlalchemy import text

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes["vector_dim"])
    model = str(context.config.attributes.get("embedding_model", ""))
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS embedding_model (
            one        boolean PRIMARY KEY DEFAULT true CHECK (one),
            model      text NOT NULL,
            dim        integer NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    # The columns' own size ("vector(384)"), whatever the configuration says.
    op.get_bind().execute(
        text(
            """
            INSERT INTO embedding_model (model, dim)
            SELECT CASE WHEN t.atttypmod = :dim THEN :model ELSE '' END, t.atttypmod
              FROM pg_attribute t
             WHERE t.attrelid = 'tools'::regclass AND t.attname = 'embedding'
            ON CONFLICT (one) DO NOTHING
            """
        ),
        {"dim": dim, "model": model},
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS embedding_model")
