"""Discovery: a weighted full-text document for tools with snake_case/camelCase names split.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Identifiers become words: "getWeatherForecast" / "get_weather-forecast" → "get weather
# forecast", so a query saying "weather forecast" matches the name lexically.
_SPLIT = (
    r"regexp_replace(regexp_replace({col}, '([a-z0-9])([A-Z])', '\1 \2', 'g'), "
    r"'[^A-Za-z0-9]+', ' ', 'g')"
)


def upgrade() -> None:
    # Weights: the tool name says most (A), its server groups related tools (B), the
    # description is long and noisy (C). Generated, so every writer of `tools` keeps it
    # right without knowing about it.
    name = _SPLIT.format(col="name")
    server = _SPLIT.format(col="server")
    op.execute(
        f"""
        ALTER TABLE tools ADD COLUMN IF NOT EXISTS search_doc tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('english', {name}), 'A')
            || setweight(to_tsvector('english', {server}), 'B')
            || setweight(to_tsvector('english', description), 'C')
        ) STORED
        """
    )
    op.execute("CREATE INDEX IF NOT EXISTS tools_search_doc_idx ON tools USING gin (search_doc)")
    # Suggestions look up capabilities by community and edges by source.
    op.execute(
        "CREATE INDEX IF NOT EXISTS capabilities_tenant_community_idx "
        "ON capabilities (tenant_id, community)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS capabilities_tenant_community_idx")
    op.execute("DROP INDEX IF EXISTS tools_search_doc_idx")
    op.execute("ALTER TABLE tools DROP COLUMN IF EXISTS search_doc")
