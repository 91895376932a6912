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
from collections.abc import Sequence
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
    pagerank: float = 0.0


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

# Every match counts idf * C; a word in the name (A) or server (B) adds the difference
# to its field's weight. Both parts are plain-lexeme GIN lookups: no weighted tsquery is
# checked against a whole search_doc (that recheck was ~5 µs a row, most of the cost),
# and only the few rows whose small name_doc (migration 0003) holds the word get a
# weighted check. Same scores as testing A, then B, then C on search_doc.
_LEXICAL_SQL = """
WITH q AS (
    SELECT word, idf, to_tsquery('simple', word) AS anywhere,
           to_tsquery('simple', word || ':A') AS in_name
      FROM unnest(%(words)s::text[], %(idf)s::float8[]) AS u(word, idf)
), parts AS (
    SELECT t.id, q.word, q.idf, q.idf * %(c)s AS part, t.pagerank
      FROM q JOIN tools AS t ON t.search_doc @@ q.anywhere
    UNION ALL
    SELECT t.id, NULL, 0,
           q.idf * CASE WHEN t.name_doc @@ q.in_name THEN %(a_extra)s ELSE %(b_extra)s END,
           NULL
      FROM q JOIN tools AS t ON t.name_doc @@ q.anywhere
)
SELECT id, sum(part) AS score,
       array_agg(word ORDER BY idf DESC) FILTER (WHERE word IS NOT NULL) AS words,
       max(pagerank) AS pagerank
  FROM parts
 GROUP BY id
 ORDER BY score DESC, id
 LIMIT %(limit)s
"""


QUERY_LEXEMES_SQL = "SELECT tsvector_to_array(to_tsvector('english', %s)) AS lexemes"


def query_words(conn: psycopg.Connection[Any], *, query: str) -> list[str]:
    """The query's stemmed words (Postgres' english stemmer and stop list), split to plain words."""
    row = conn.execute(QUERY_LEXEMES_SQL, (query,)).fetchone()
    return words_of_row(row)


def words_of_row(row: Any) -> list[str]:
    """``query_words`` from a row of ``QUERY_LEXEMES_SQL`` (for callers that pipeline it)."""
    lexemes = _get(row, "lexemes", 0) if row else []
    return lexeme_words(lexemes or [])


def idf(*, total: int, frequency: int) -> float:
    """BM25's smoothed inverse document frequency (always > 0)."""
    return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))


def lexical_tool_search(
    conn: psycopg.Connection[Any], *, query: str, limit: int
) -> list[LexicalHit]:
    """Top ``limit`` tools by summed idf * field weight of the query words they contain."""
    statement = lexical_query(conn, words=query_words(conn, query=query), limit=limit)
    if statement is None:
        return []
    return lexical_hits(conn.execute(*statement).fetchall())


def lexical_query(
    conn: psycopg.Connection[Any], *, words: Sequence[str], limit: int
) -> tuple[str, dict[str, Any]] | None:
    """The statement ``lexical_hits`` reads, for ``query_words``; None when no word can match.

    Split from running it so a caller can send it in one pipeline with other queries.
    """
    total, frequencies = DOC_FREQUENCIES.get(conn)
    if total == 0:
        return None
    kept = [w for w in words if 0 < frequencies.get(w, 0) <= max(1, MAX_DOC_FRACTION * total)]
    if not kept:
        return None
    return _LEXICAL_SQL, {
        "words": kept,
        "idf": [idf(total=total, frequency=frequencies[w]) for w in kept],
        "c": FIELD_WEIGHTS["C"],
        "a_extra": FIELD_WEIGHTS["A"] - FIELD_WEIGHTS["C"],
        "b_extra": FIELD_WEIGHTS["B"] - FIELD_WEIGHTS["C"],
        "limit": limit,
    }


def lexical_hits(rows: Sequence[Any]) -> list[LexicalHit]:
    """Hits from the rows of ``lexical_query``'s statement, best first."""
    return [
        LexicalHit(
            id=_get(r, "id", 0),
            score=float(_get(r, "score", 1)),
            words=_get(r, "words", 2),
            pagerank=float(_get(r, "pagerank", 3) or 0.0),
        )
        for r in rows
    ]


def _get(row: Any, key: str, index: int) -> Any:
    # Works with dict rows (the project default) and tuple rows alike.
    return row[key] if isinstance(row, dict) else row[index]


def _scalar(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(_get(row, "n", 0)) if row else 0
