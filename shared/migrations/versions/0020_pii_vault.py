"""The PII token vault, and what each execution tokenised.

``pii_vault`` maps a tenant's token (``⟨EMAIL_…⟩``) to its value, encrypted with AES-GCM
under the stack's PII key (``key_id`` names the key, so a rotated key's rows are still
read with the previous one); a row past ``expires_at`` no longer resolves.
``audit_log`` accepts ``pii_resolve`` (an admin key resolved tokens).
``executions.pii`` lists the tokens a run produced (kind, tool; never values) and the
tokens it was given that did not resolve; ``tools.pii`` the operator's setting for a tool
(the ``"pii"`` of its server's ``agentcards`` block).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-25
"""

from alembic import op

_ACTIONS = (
    "'execute', 'capability_execute', 'search', 'key_create', 'key_revoke', 'cache_clear', "
    "'tool_call_refused'"
)

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS pii_vault (
            tenant_id   text NOT NULL,
            token       text NOT NULL,
            kind        text NOT NULL,
            key_id      text NOT NULL,
            ciphertext  bytea NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            expires_at  timestamptz NOT NULL,
            PRIMARY KEY (tenant_id, token)
        )
        """
    )
    op.execute("CREATE INDEX IF NOT EXISTS pii_vault_expires_idx ON pii_vault (expires_at)")
    op.execute("ALTER TABLE executions ADD COLUMN IF NOT EXISTS pii jsonb")
    # The operator's setting for a tool's data: NULL every kind, {"kinds": [...]} those only.
    op.execute("ALTER TABLE tools ADD COLUMN IF NOT EXISTS pii jsonb")
    _actions(f"{_ACTIONS}, 'pii_resolve'")


def _actions(allowed: str) -> None:
    op.execute("ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_action_check")
    op.execute(
        f"ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check CHECK (action IN ({allowed}))"
    )


def downgrade() -> None:
    op.execute("DELETE FROM audit_log WHERE action = 'pii_resolve'")
    _actions(_ACTIONS)
    op.execute("ALTER TABLE executions DROP COLUMN IF EXISTS pii")
    op.execute("ALTER TABLE tools DROP COLUMN IF EXISTS pii")
    op.execute("DROP TABLE IF EXISTS pii_vault")
