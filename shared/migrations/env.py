"""Alembic environment: online migrations only, serialized by a Postgres advisory lock."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, text

# Every process may run migrations at start; the lock makes the second one wait
# and then find nothing to do instead of racing on CREATE TABLE.
MIGRATION_LOCK_ID = 0x4147454E54  # "AGENT"

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "run migrations through shared.db.migrate()"

engine = create_engine(url, future=True)
with engine.connect() as connection:
    connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
    connection.commit()
    try:
        context.configure(connection=connection, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        # A failed migration leaves the transaction aborted; roll back so the unlock
        # runs and the original error (not "transaction is aborted") reaches the user.
        connection.rollback()
        connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID})
        connection.commit()
engine.dispose()
