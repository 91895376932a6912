"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension): a long run an MCP client polls.

A task is an execution seen through MCP: one row per task, naming its execution, the tenant
and the caller (key or person) that created it, and how long it stays readable. Its status
is the execution's, read from the execution's row, so a task lives exactly as long as its
run: on any gateway replica, across a gateway restart, ``worker_lost`` when its worker
died. The id is random (192 bits), never derived from the execution's. The execution row
carries its task's id (``mcp_task_id``) so REST, SSE and the dashboard show it.

Revision ID: 0032
Revises: 0029
Create Date: 2026-11-28
"""

from alembic import op

revision = "0032"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE mcp_tasks (
            id                text PRIMARY KEY,
            execution_id      uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
            tenant_id         text NOT NULL,
            principal         text NOT NULL,
            endpoint          text NOT NULL,
            tool              text NOT NULL,
            ttl_ms            integer NOT NULL,
            poll_interval_ms  integer NOT NULL,
            created_at        timestamptz NOT NULL DEFAULT now(),
            expires_at        timestamptz NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX mcp_tasks_execution_id ON mcp_tasks (execution_id)")
    op.execute("ALTER TABLE executions ADD COLUMN mcp_task_id text")


def downgrade() -> None:
    op.execute("ALTER TABLE executions DROP COLUMN IF EXISTS mcp_task_id")
    op.execute("DROP TABLE IF EXISTS mcp_tasks")
