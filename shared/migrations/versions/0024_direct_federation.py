"""Direct federation: what each downstream server said at ``initialize``, and a key's
default MCP mode.

``mcp_servers.server_info`` holds the last ``initialize`` result a toolhost replica got
from the server: ``protocol_version`` (the revision it speaks with us), ``server_info``
(its name, version, title), ``instructions`` (served again at ``/mcp/servers/<name>``) and
``capabilities``; NULL until a replica connected. ``api_keys.mcp_mode`` is what a key's
``/mcp`` serves when a request does not say: ``code`` (NULL: the default), ``direct`` or
``both``.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-26
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE mcp_servers ADD COLUMN IF NOT EXISTS server_info jsonb")
    op.execute("ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS mcp_mode text")
    op.execute("ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_mcp_mode_check")
    op.execute(
        "ALTER TABLE api_keys ADD CONSTRAINT api_keys_mcp_mode_check "
        "CHECK (mcp_mode IS NULL OR mcp_mode IN ('code', 'direct', 'both'))"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_mcp_mode_check")
    op.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS mcp_mode")
    op.execute("ALTER TABLE mcp_servers DROP COLUMN IF EXISTS server_info")
