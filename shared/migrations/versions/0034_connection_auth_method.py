"""People's connections keep how their client authenticates at the token endpoint.

``upstream_connections.auth_method`` is the token endpoint authentication method (RFC 7591
names: ``none``, ``client_secret_basic``, ``client_secret_post``) the authorization server
registered the gateway's client with, so a refresh or a revocation authenticates the way
it was registered. A row from before has none: it is read as ``client_secret_basic`` when
the client has a secret, else ``none`` (what the gateway did until then).

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-28
"""

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE upstream_connections ADD COLUMN IF NOT EXISTS auth_method text")


def downgrade() -> None:
    op.execute("ALTER TABLE upstream_connections DROP COLUMN IF EXISTS auth_method")
