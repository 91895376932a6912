"""Migrations against the real embedded Postgres: complete, idempotent, tenant-aware."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import numpy as np
import psycopg
import pytest

from deploy.launcher.embedded import EmbeddedPostgres
from shared.config import Settings
from shared.db import connect, migrate
from shared.embeddings import get_embedder
from shared.errors import ConfigError, DependencyError
from shared.learning.reembed import COLUMNS, DERIVED, reembed
from tests.conftest import server_dir
from tests.stack import with_database

TABLES = {
    "mcp_servers",
    "toolhost_servers",
    "tools",
    "tool_edges",
    "executions",
    "capabilities",
    "capability_cache",
    "cache_invalidation_log",
    "adaptive_thresholds",
    "suggestion_feedback",
    "api_keys",
}


def test_every_architecture_table_exists_with_hnsw_indexes(pg_url: str) -> None:
    with connect(pg_url) as conn:
        tables = {
            r["table_name"]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
        hnsw = {
            r["indexname"]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE indexdef ILIKE '%USING hnsw%'"
            )
        }
    assert tables >= TABLES
    assert {"tools_embedding_hnsw", "capabilities_embedding_hnsw"} <= hnsw


def test_migrating_twice_is_a_no_op(settings: Settings) -> None:
    with connect(settings.database_url or "") as conn:
        conn.execute("INSERT INTO api_keys (name, key_hash) VALUES ('k', 'h')")
        conn.commit()
    assert migrate(settings) == migrate(settings)
    with connect(settings.database_url or "") as conn:
        assert conn.execute("SELECT count(*) AS n FROM api_keys").fetchone() == {"n": 1}


def test_client_rows_carry_the_default_tenant(pg_url: str) -> None:
    with connect(pg_url) as conn:
        row = conn.execute(
            "INSERT INTO executions (code, timeout_s) VALUES ('return 1', 30) RETURNING tenant_id"
        ).fetchone()
        cols = {
            r["table_name"]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.columns WHERE column_name = 'tenant_id'"
            )
        }
    assert row == {"tenant_id": "default"}
    assert {"executions", "capabilities", "capability_cache", "api_keys"} <= cols


def test_vector_columns_follow_the_configured_model(pg_url: str) -> None:
    with connect(pg_url) as conn:
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute "
            "WHERE attrelid = 'capabilities'::regclass AND attname = 'intent_embedding'"
        ).fetchone()
    assert row == {"t": "vector(384)"}


def _settings(url: str, model: str = "all-MiniLM-L6-v2", **kw: object) -> Settings:
    return Settings(
        database_url=url, redis_url="redis://unused", env="test", embedding_model=model, **kw
    )  # type: ignore[arg-type]


def test_a_model_of_another_dimension_is_refused(pg_url: str) -> None:
    with pytest.raises(
        ConfigError, match=r"'all-MiniLM-L6-v2' \(384-d\).*'BAAI/bge-m3' \(1024-d\)"
    ):
        migrate(_settings(pg_url, "BAAI/bge-m3"))


def test_another_model_of_the_same_size_is_refused(pg_url: str) -> None:
    # Same size, other vectors: storing would work and searching would rank garbage.
    with pytest.raises(ConfigError, match="agentcards reembed"):
        migrate(_settings(pg_url, "/models/paraphrase-MiniLM-L3-v2", embedding_dim=384))


def test_reembed_moves_a_database_to_another_model(embedded_pg: EmbeddedPostgres) -> None:
    # A database made for a 1024-d model, with a tool, a past run and a learned adapter.
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = with_database(embedded_pg.url, name)
    migrate(_settings(url, "BAAI/bge-m3"))
    old = np.ones(1024, np.float32) / 32
    with connect(url) as conn:
        conn.execute(
            "INSERT INTO tools (id, server, name, description, schema_hash, embedding) "
            "VALUES ('git:git_status', 'git', 'git_status', 'Show the working tree status', "
            "'h', %s)",
            (old,),
        )
        conn.execute(
            "INSERT INTO intent_tools (tenant_id, intent, intent_embedding, tools_ok) "
            "VALUES ('default', 'what changed in the repo', %s, '{git:git_status}')",
            (old,),
        )
        conn.execute(
            "INSERT INTO query_adapters (tenant_id, version, trained_on, held_back, shipped, "
            "dim, seconds) VALUES ('default', 1, 5, 5, true, 1024, 0.1)"
        )
        conn.commit()
    minilm = _settings(url)
    with pytest.raises(ConfigError, match="reembed"):
        migrate(minilm)

    embedder = get_embedder(minilm)
    with connect(url) as conn:
        counts = reembed(conn, embed=embedder.embed, model=minilm.embedding_model, dim=384)
    assert counts["tools"] == 1 and counts["intent_tools"] == 1 and counts["query_adapters"] == 1

    migrate(minilm)  # starts now
    with pytest.raises(ConfigError, match=r"'all-MiniLM-L6-v2' \(384-d\)"):
        migrate(_settings(url, "BAAI/bge-m3"))
    with connect(url) as conn:
        tool = conn.execute("SELECT embedding FROM tools").fetchone()
        intent = conn.execute("SELECT intent_embedding FROM intent_tools").fetchone()
        adapters = conn.execute("SELECT count(*) AS n FROM query_adapters").fetchone()
        hnsw = conn.execute(
            "SELECT count(*) AS n FROM pg_indexes WHERE indexname = 'tools_embedding_hnsw'"
        ).fetchone()
    expected = embedder.embed(
        ["git git_status: Show the working tree status", "what changed in the repo"]
    )
    assert np.dot(tool["embedding"].to_numpy(), expected[0]) > 0.9999
    assert np.dot(intent["intent_embedding"].to_numpy(), expected[1]) > 0.9999
    assert adapters == {"n": 0} and hnsw == {"n": 1}


def test_reembed_knows_every_vector_column(pg_url: str) -> None:
    with connect(pg_url) as conn:
        found = {
            (r["table_name"], r["column_name"])
            for r in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE udt_name = 'vector' AND table_schema = 'public'"
            )
        }
    assert found == {(c.table, c.column) for c in (*COLUMNS, *DERIVED)}


def test_unreachable_postgres_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"postgresql://postgres@/postgres?host={tmp_path}"
    with pytest.raises(DependencyError, match="PostgreSQL unreachable"):
        migrate(Settings(database_url=url, redis_url="redis://unused", env="test"))


def test_postgres_without_pgvector_is_refused(embedded_pg, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A real server whose pg_available_extensions lacks vector cannot be made here, so
    # hide it from this connection's view the way such a server would show it.
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS novec")
        conn.execute("CREATE DATABASE novec")
    url = embedded_pg.url.replace("/postgres?", "/novec?")
    import shared.db as db

    real_connect = psycopg.connect

    def no_vector_connect(*a, **kw):  # type: ignore[no-untyped-def]
        conn = real_connect(*a, **kw)
        conn.execute("CREATE TEMP VIEW pg_available_extensions AS SELECT 'x'::name AS name")
        return conn

    monkeypatch.setattr(db.psycopg, "connect", no_vector_connect)
    with pytest.raises(DependencyError, match="no pgvector extension available"):
        migrate(Settings(database_url=url, redis_url="redis://unused", env="test"))


def _agentcards(*args: str, url: str, redis_url: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env |= {"AGENTCARDS_DATABASE_URL": url, "AGENTCARDS_REDIS_URL": redis_url}
    return subprocess.Popen(
        [sys.executable, "-m", "deploy.cli.main", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_a_pod_waits_for_the_migration_job_then_serves(embedded_pg, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """`migrate --wait` (each pod's init step on Kubernetes) applies nothing, names what it
    waits for, gives up at its timeout, and lets the pod start once the migration ran."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = with_database(embedded_pg.url, name)

    early = _agentcards("migrate", "--wait", "--timeout", "2", url=url, redis_url=redis_url)
    out, _ = early.communicate(timeout=120)
    assert early.returncode == 1, out
    assert "gave up after 2 s: database at revision none, this release needs" in out
    with psycopg.connect(url) as plain:  # it applied nothing
        assert plain.execute("SELECT to_regclass('executions')").fetchone() == (None,)

    waiting = _agentcards("migrate", "--wait", "--timeout", "120", url=url, redis_url=redis_url)
    time.sleep(2)
    assert waiting.poll() is None, "it must wait while the schema is behind"
    job = _agentcards("migrate", url=url, redis_url=redis_url)
    job_out, _ = job.communicate(timeout=120)
    assert job.returncode == 0, job_out
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, out
    head = job_out.split("database at revision ")[1].split()[0]
    assert f"database at revision {head}" in out


TWO_IN_TURN = """
import shutil, sys
from pathlib import Path
from deploy.launcher.embedded import EmbeddedPostgres
for home in map(Path, sys.argv[1:]):
    EmbeddedPostgres.start(home / "pgdata").stop()
    shutil.rmtree(home)
"""


def test_a_process_that_runs_two_embedded_servers_in_turn_leaves_no_lock_file_behind() -> None:
    # As benchmarks and `agentcards demo` do with their temporary stacks: each home deleted
    # after its server stops, the next server's pgserver lock must not re-create the first.
    scratch = server_dir("two-homes")
    homes = [scratch / "first", scratch / "second"]
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}  # as a fresh shell
    done = subprocess.run(
        [sys.executable, "-c", TWO_IN_TURN, *map(str, homes)],
        env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*")) == []
