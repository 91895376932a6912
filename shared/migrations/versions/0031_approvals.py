"""Approvals: a tool call a policy permits only with a person's yes waits for one.

One row per paused call (``approvals``), keyed by its execution and its call's id in that
run's trace. The toolhost writes it ``pending`` when the policy asks for approval; an
approver's answer moves it to ``approved`` or ``denied`` (only from ``pending``, only before
``expires_at``: one answer wins); the toolhost moves an approved one to ``executed`` under
the row's lock just before the call goes out (so it runs once) and a pending one past its
time to ``expired``. No foreign key to ``executions``: a direct call's row is written after
its answer. ``audit_log`` accepts ``submission_refused`` (a policy refused running code or
a capability), ``approval_requested`` and ``approval_decided``.

Revision ID: 0031
Revises: 0032
Create Date: 2026-11-28
"""

from alembic import op

_ACTIONS = (
    "'execute', 'capability_execute', 'search', 'key_create', 'key_revoke', 'cache_clear', "
    "'tool_call_refused', 'pii_resolve'"
)
_NEW = "'submission_refused', 'approval_requested', 'approval_decided'"

revision = "0031"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE approvals (
            execution_id  text NOT NULL,
            call_id       text NOT NULL,
            tenant_id     text NOT NULL,
            tool          text NOT NULL,
            args          jsonb NOT NULL,
            args_hash     text NOT NULL,
            surface       text NOT NULL,
            policies      jsonb NOT NULL,              -- the ids of the permits asking
            approvers     jsonb NOT NULL,              -- groups and key names; [] = admins
            caller_key    text,                        -- who made the call: a key id
            caller_user   text,                        -- or a person's sub
            status        text NOT NULL DEFAULT 'pending' CHECK (status IN (
                              'pending', 'approved', 'denied', 'expired', 'executed')),
            decided_by    text,                        -- "key:<name>" or "user:<sub>"
            reason        text,
            created_at    timestamptz NOT NULL DEFAULT now(),
            expires_at    timestamptz NOT NULL,
            decided_at    timestamptz,
            executed_at   timestamptz,
            PRIMARY KEY (execution_id, call_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX approvals_pending_idx ON approvals (tenant_id, created_at) "
        "WHERE status = 'pending'"
    )
    _actions(f"{_ACTIONS}, {_NEW}")


def _actions(allowed: str) -> None:
    op.execute("ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_action_check")
    op.execute(
        f"ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check CHECK (action IN ({allowed}))"
    )


def downgrade() -> None:
    op.execute(f"DELETE FROM audit_log WHERE action IN ({_NEW})")
    _actions(_ACTIONS)
    op.execute("DROP TABLE IF EXISTS approvals")
