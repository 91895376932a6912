"""An API key may opt out of PII tokenisation (a trusted back-office key).

``api_keys.pii`` is ``tokenize`` (the default: the stack's setting applies) or ``off``
(runs submitted with the key return values as the tools returned them). Creating such a
key is audited (``key_create`` with ``"pii": "off"`` in its details). docs/privacy.md.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS pii text NOT NULL DEFAULT 'tokenize' "
        "CONSTRAINT api_keys_pii_check CHECK (pii IN ('tokenize', 'off'))"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS pii")
