"""PostgreSQL access: connections with pgvector registered, a pool, migrations, health."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

from shared.config import Settings, canonical_model
from shared.errors import ConfigError, DependencyError


def psycopg_url(url: str) -> str:
    """A libpq URL (strip SQLAlchemy's driver suffix if one was configured)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _configure(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    # jsonb through orjson: the stdlib's json.loads costs ~10x more per trace row.
    set_json_loads(orjson.loads, conn)


def database_key(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """host:port/dbname of a connection: the key for per-database, per-process caches."""
    return f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}"


@contextmanager
def autocommit(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """``conn`` in autocommit mode for the block, then as it was (pooled connections
    go back to the pool the way the next user expects them)."""
    previous = conn.autocommit
    conn.autocommit = True
    try:
        yield conn
    finally:
        if not conn.closed:
            conn.autocommit = previous


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection[dict[str, Any]]:
    """One connection returning dict rows, with the vector type registered."""
    try:
        conn = psycopg.connect(psycopg_url(url), autocommit=autocommit, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise DependencyError(
            f"PostgreSQL unreachable at {redact(url)}: {_first_line(exc)}"
        ) from exc
    try:
        _configure(conn)
    except psycopg.ProgrammingError as exc:
        conn.close()
        raise DependencyError(
            "PostgreSQL has no pgvector extension (CREATE EXTENSION vector failed or was "
            "never run): install pgvector on that server or unset AGENTCARDS_DATABASE_URL "
            "to use the embedded one"
        ) from exc
    return conn


DictConnection = psycopg.Connection[dict[str, Any]]


def make_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 8,
    timeout: float = 30.0,
    pool_class: type[ConnectionPool[DictConnection]] = ConnectionPool,
) -> ConnectionPool[DictConnection]:
    """A connection pool of dict-row connections with pgvector registered.

    ``timeout``: how long a caller waits for a connection (PoolTimeout after it).
    """
    return pool_class(
        psycopg_url(url),
        connection_class=DictConnection,
        min_size=min_size,
        max_size=max_size,
        kwargs={"row_factory": dict_row},
        configure=_configure,
        timeout=timeout,
        open=True,
    )


def _alembic(settings: Settings, target: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("shared") / "migrations"))
    cfg.set_main_option(
        "sqlalchemy.url",
        psycopg_url(target).replace("postgresql://", "postgresql+psycopg://", 1).replace("%", "%%"),
    )
    cfg.attributes["vector_dim"] = settings.vector_dim
    cfg.attributes["embedding_model"] = canonical_model(settings.embedding_model)
    return cfg


def migrate(settings: Settings, *, url: str | None = None, check_model: bool = True) -> str:
    """Apply every pending migration (a no-op when up to date); returns the head revision.

    Then refuses (ConfigError) a database whose vectors another model made, unless
    ``check_model`` is False (``agentcards reembed``, which is about to re-embed them)."""
    from alembic import command
    from alembic.script import ScriptDirectory

    target = url or settings.require_urls()[0]
    check_pgvector_available(target)
    cfg = _alembic(settings, target)
    try:
        command.upgrade(cfg, "head")
    except Exception as exc:  # SQLAlchemy wraps the driver error; name the cause
        cause = _first_line(exc.__cause__ or exc)
        if "extension" in cause and "vector" in cause:
            raise DependencyError(
                f"cannot enable pgvector on {redact(target)} ({cause}): run "
                "`CREATE EXTENSION vector` there as a superuser, or unset "
                "AGENTCARDS_DATABASE_URL to use the embedded server"
            ) from exc
        raise DependencyError(f"migrating {redact(target)} failed: {cause}") from exc
    head = ScriptDirectory.from_config(cfg).get_current_head()
    if check_model:
        check_database_model(settings, url=target)
    return head or ""


def check_database_model(settings: Settings, *, url: str | None = None) -> None:
    """Refuse (ConfigError) a database whose vectors another model made than ``settings``'s:
    what ``migrate`` checks at a gateway's or toolhost's start, for the processes that embed
    without migrating (the learning workers)."""
    target = url or settings.require_urls()[0]
    with psycopg.connect(psycopg_url(target), autocommit=True) as conn:
        check_stored_model(
            read_stored_model(conn), model=settings.embedding_model, dim=settings.vector_dim
        )


def schema_state(settings: Settings) -> tuple[str, str]:
    """(the database's schema revision, this code's head): "" for a database never migrated.

    A revision this code does not know is a newer release's (this image rolled back to):
    waiting would never end, so ``schema_is_current`` lets it pass.
    """
    from alembic.script import ScriptDirectory

    target = settings.require_urls()[0]
    head = ScriptDirectory.from_config(_alembic(settings, target)).get_current_head() or ""
    with psycopg.connect(psycopg_url(target), autocommit=True, connect_timeout=5) as conn:
        exists = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
        row = (
            conn.execute("SELECT version_num FROM alembic_version").fetchone()
            if exists and exists[0]
            else None
        )
    return (row[0] if row else ""), head


def schema_is_current(settings: Settings) -> bool:
    """True when the database is at this code's head revision, or at a newer release's."""
    from alembic.script import ScriptDirectory

    current, head = schema_state(settings)
    if not current:
        return False
    known = {
        script.revision
        for script in ScriptDirectory.from_config(
            _alembic(settings, settings.require_urls()[0])
        ).walk_revisions()
    }
    return current == head or current not in known


def check_pgvector_available(url: str) -> None:
    """Fail with a clear message when the server cannot provide pgvector."""
    try:
        with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
    except psycopg.OperationalError as exc:
        raise DependencyError(
            f"PostgreSQL unreachable at {redact(url)}: {_first_line(exc)}"
        ) from exc
    if row is None:
        raise DependencyError(
            f"PostgreSQL at {redact(url)} has no pgvector extension available: install pgvector "
            "there (e.g. the pgvector/pgvector image) or unset AGENTCARDS_DATABASE_URL to use "
            "the embedded server"
        )


@dataclass(frozen=True)
class StoredModel:
    """The model a database's vectors were made with ("" when none was recorded: table
    ``embedding_model``, migration 0035) and the size of its vector columns."""

    model: str
    dim: int


def read_stored_model(conn: psycopg.Connection[Any]) -> StoredModel | None:
    """The database's record and the size of ``tools.embedding``; None before migrations."""
    cur = conn.cursor(row_factory=tuple_row)
    dim, recorded = cur.execute(
        "SELECT (SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('tools') "
        "AND attname = 'embedding'), to_regclass('embedding_model') IS NOT NULL"
    ).fetchone() or (None, False)
    if dim is None:
        return None
    row = cur.execute("SELECT model FROM embedding_model").fetchone() if recorded else None
    return StoredModel(model=str(row[0]) if row else "", dim=int(dim))


def check_stored_model(stored: StoredModel | None, *, model: str, dim: int) -> None:
    """Refuse to run (ConfigError) when the stored vectors are not ``model``'s (``dim``-d):
    two models' vectors, even of one size, are not comparable, and mixing them ranks garbage."""
    if stored is None:
        return
    if stored.dim == dim and canonical_model(stored.model) == canonical_model(model):
        return
    made_with = (
        f"{stored.model!r} ({stored.dim}-d)"
        if stored.model
        else f"a model it did not record ({stored.dim}-d)"
    )
    back = f", or set AGENTCARDS_EMBEDDING_MODEL={stored.model} again" if stored.model else ""
    raise ConfigError(
        f"the database's vectors were made with {made_with} but AGENTCARDS_EMBEDDING_MODEL is "
        f"{model!r} ({dim}-d): stop the services and run `agentcards reembed` to re-embed the "
        f"stored tools, intents and capabilities with it{back}"
    )


def ping(url: str, *, timeout_s: float = 2.0) -> None:
    """Raise DependencyError unless Postgres answers with pgvector installed."""
    try:
        with psycopg.connect(psycopg_url(url), connect_timeout=max(1, int(timeout_s))) as conn:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
    except psycopg.OperationalError as exc:
        raise DependencyError(f"postgres: {_first_line(exc)}") from exc
    if row is None:
        raise DependencyError("postgres: pgvector extension not installed (migrations not run?)")


def redact(url: str) -> str:
    """The URL with any password replaced, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


HNSW_DEFAULT_EF_SEARCH = "40"  # pgvector's default
# Planner methods that compete with an index scan for "ORDER BY distance LIMIT k".
_SCAN_SETTINGS = ("enable_seqscan", "enable_bitmapscan", "enable_sort")


@contextmanager
def index_scans_only(
    conn: psycopg.Connection[Any], *, ef_search: int | None = None
) -> Iterator[None]:
    """Within the caller's transaction, plan the enclosed statements with index scans.

    For nearest-neighbour lookups on a table that grew since it was last analysed
    (a learning batch inserts hundreds of capabilities in seconds): the stale row
    estimate makes a scan + sort look cheaper than the HNSW index, and the scan
    then costs O(table) per lookup. ``ef_search`` sets pgvector's HNSW candidate list
    for them too. The previous settings come back afterwards.
    """
    names = list(_SCAN_SETTINGS)
    values = ["off"] * len(names)
    if ef_search is not None:
        names.append("hnsw.ef_search")
        values.append(str(ef_search))
    rows = conn.execute(
        "SELECT current_setting(n, true) AS v "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i",
        (names,),
    ).fetchall()
    # hnsw.ef_search exists once pgvector's library is loaded in this session; until
    # then it is unset, which means pgvector's default.
    previous = [(r["v"] if isinstance(r, dict) else r[0]) or HNSW_DEFAULT_EF_SEARCH for r in rows]
    conn.execute(
        "SELECT set_config(n, v, true) FROM unnest(%s::text[], %s::text[]) AS u(n, v)",
        (names, values),
    )
    try:
        yield
    finally:
        if not conn.broken and conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR:
            conn.execute(
                "SELECT set_config(n, v, true) FROM unnest(%s::text[], %s::text[]) AS u(n, v)",
                (names, previous),
            )
