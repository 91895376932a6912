"""IDF-weighted full-text tool search over ``tools.search_doc`` (Postgres FTS, OR semantics).

Postgres' ts_rank has no inverse document frequency, so a long request's common
words ("get", "file") count as much as its rare ones ("wechat", "pdf"). Here every
query word scores idf * field weight (name > server > description) in each tool
that contains it, summed — BM25's idea without length normalisation.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from shared.search.query import lexeme_words

# Words in more than this share of tools are dropped from the query: they match
# thousands of rows at scale (cost) and barely discriminate (idf ≈ 0.2 at 20 %).
MAX_DOC_FRACTION = 0.2
# Document frequencies change only when tools are synced; recomputing them (ts_stat
# scans every tool) at most once a minute keeps the per-query cost at a dict lookup.
DF_TTL_S = 60.0
# Field weights of the setweight() labels in migration 0002: name A, server B, description C.
FIELD_WEIGHTS = {"A": 1.0, "B": 0.5, "C": 0.3}


@dataclass(frozen=True)
class LexicalHit:
    """One tool's lexical score and the query words it contains."""

    id: str
    score: float
    words: list[str]


class _DocFrequencies:
    """Per-database cache of lexeme → number of tools containing it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_db: dict[str, tuple[float, int, dict[str, int]]] = {}

    def get(self, conn: psycopg.Connection[Any]) -> tuple[int, dict[str, int]]:
        key = f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}"
        now = time.monotonic()
        with self._lock:
            cached = self._by_db.get(key)
        if cached and now - cached[0] < DF_TTL_S:
            return cached[1], cached[2]
        total = _scalar(conn, "SELECT count(*) AS n FROM tools WHERE search_doc IS NOT NULL")
        rows = conn.execute(
            "SELECT word, ndoc FROM ts_stat('SELECT search_doc FROM tools')"
        ).fetchall()
        frequencies = {_get(row, "word", 0): int(_get(row, "ndoc", 1)) for row in rows}
        with self._lock:
            self._by_db[key] = (now, total, frequencies)
        return total, frequencies

    def clear(self) -> None:
        with self._lock:
            self._by_db.clear()


DOC_FREQUENCIES = _DocFrequencies()


def query_words(conn: psycopg.Connection[Any], *, query: str) -> list[str]:
    """The query's stemmed words (Postgres' english stemmer and stop list), split to plain words."""
    row = conn.execute(
        "SELECT tsvector_to_array(to_tsvector('english', %s)) AS lexemes", (query,)
    ).fetchone()
    lexemes = _get(row, "lexemes", 0) if row else []
    return lexeme_words(lexemes or [])


def idf(*, total: int, frequency: int) -> float:
    """BM25's smoothed inverse document frequency (always > 0)."""
    return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))


def lexical_tool_search(
    conn: psycopg.Connection[Any], *, query: str, limit: int
) -> list[LexicalHit]:
    """Top ``limit`` tools by summed idf * field weight of the query words they contain."""
    total, frequencies = DOC_FREQUENCIES.get(conn)
    if total == 0:
        return []
    words = [
        w
        for w in query_words(conn, query=query)
        if 0 < frequencies.get(w, 0) <= max(1, MAX_DOC_FRACTION * total)
    ]
    if not words:
        return []
    weights = [idf(total=total, frequency=frequencies[w]) for w in words]
    rows = conn.execute(
        """
        SELECT t.id,
               sum(q.idf * CASE WHEN t.search_doc @@ q.in_name THEN %(a)s
                                WHEN t.search_doc @@ q.in_server THEN %(b)s
                                ELSE %(c)s END) AS score,
               array_agg(q.word ORDER BY q.idf DESC) AS words
          FROM (SELECT word, idf,
                       to_tsquery('simple', word) AS anywhere,
                       to_tsquery('simple', word || ':A') AS in_name,
                       to_tsquery('simple', word || ':B') AS in_server
                  FROM unnest(%(words)s::text[], %(idf)s::float8[]) AS u(word, idf)) AS q
          JOIN tools AS t ON t.search_doc @@ q.anywhere
         GROUP BY t.id
         ORDER BY score DESC, t.id
         LIMIT %(limit)s
        """,
        {
            "words": words,
            "idf": weights,
            "a": FIELD_WEIGHTS["A"],
            "b": FIELD_WEIGHTS["B"],
            "c": FIELD_WEIGHTS["C"],
            "limit": limit,
        },
    ).fetchall()
    return [
        LexicalHit(id=_get(r, "id", 0), score=float(_get(r, "score", 1)), words=_get(r, "words", 2))
        for r in rows
    ]


def _get(row: Any, key: str, index: int) -> Any:
    # Works with dict rows (the project default) and tuple rows alike.
    return row[key] if isinstance(row, dict) else row[index]


def _scalar(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(_get(row, "n", 0)) if row else 0
