"""People's OAuth connections to servers behind the gateway (``"auth": {"type": "oauth"}``).

One row per tenant, user and server: the tokens the server's authorization server issued to
that person (access, refresh), sealed with the stack's PII key and bound to the row's tenant,
user and server (shared/connections/store.py), never in plaintext; where to refresh them
(the token endpoint, the client the toolhost registered there) and when the access token
expires.

Revision ID: 0030
Revises: 0032
Create Date: 2026-11-28
"""

from alembic import op

revision = "0030"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE upstream_connections (
            tenant_id        text NOT NULL,
            user_id          text NOT NULL,
            server           text NOT NULL,
            access_token     text NOT NULL,
            refresh_token    text,
            expires_at       timestamptz,
            scope            text,
            token_endpoint   text NOT NULL,
            client_id        text NOT NULL,
            client_secret    text,
            resource         text NOT NULL,
            created_at       timestamptz NOT NULL DEFAULT now(),
            refreshed_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, user_id, server)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS upstream_connections")
