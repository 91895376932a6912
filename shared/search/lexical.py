"""IDF-weighted lexical tool search over ``tools.search_doc``, from an in-memory inverted index.

Postgres' ts_rank has no inverse document frequency, so a long request's common
words ("get", "file") count as much as its rare ones ("wechat", "pdf"). Here every
query word scores idf * field weight (name > server > description) in each tool
that contains it, summed — BM25's idea without length normalisation.

The words of every tool (``search_doc`` and ``name_doc``, migrations 0002-0003)
change only when tools are synced, and ``search_state.tools_version`` (migration
0004) changes with them: each process keeps the postings in memory and reloads
them when the version it reads with the query's words differs. Scoring a long
request is then a few array additions instead of thousands of heap rows (~5 ms
at 10k tools in SQL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from shared.search.query import lexeme_words
from shared.versioned import VersionedCache

# Words in more than this share of tools are dropped from the query: they barely
# discriminate (idf ≈ 0.2 at 20 %).
MAX_DOC_FRACTION = 0.2
# Field weights of the setweight() labels in migration 0002: name A, server B, description C.
FIELD_WEIGHTS = {"A": 1.0, "B": 0.5, "C": 0.3}

# The query's words and the version of the tools' words, in one round trip.
QUERY_LEXEMES_SQL = """
SELECT tsvector_to_array(to_tsvector('english', %s)) AS lexemes,
       (SELECT tools_version FROM search_state) AS version
"""
# Every tool's words, and which of them are in its name (A) or in its name or server;
# for the fusion, its server's words (B), its description's (C) and its parameters' names
# and descriptions (split like the name in migration 0002), each as its own evidence.
_WORDS_SQL = r"""
SELECT id, tsvector_to_array(search_doc) AS words,
       ARRAY(SELECT lexeme FROM unnest(name_doc) WHERE 'A' = ANY(weights)) AS in_name,
       tsvector_to_array(name_doc) AS in_name_or_server,
       ARRAY(SELECT lexeme FROM unnest(name_doc) WHERE 'B' = ANY(weights)) AS in_server,
       ARRAY(SELECT lexeme FROM unnest(search_doc) WHERE 'C' = ANY(weights)) AS in_description,
       (SELECT tsvector_to_array(to_tsvector('english', coalesce(string_agg(
                   regexp_replace(regexp_replace(p.key, '([a-z0-9])([A-Z])', '\1 \2', 'g'),
                                  '[^A-Za-z0-9]+', ' ', 'g')
                   || ' ' || coalesce(p.value ->> 'description', ''), ' '), '')))
          FROM jsonb_each(CASE WHEN jsonb_typeof(input_schema -> 'properties') = 'object'
                               THEN input_schema -> 'properties' ELSE '{}'::jsonb END) AS p
       ) AS in_params
  FROM tools
 WHERE search_doc IS NOT NULL
 ORDER BY id COLLATE "C"
"""
# The separate fields a tool's words are weighed in by the fusion (see ``coverage``).
FIELDS = ("name", "description", "params", "server")


@dataclass(frozen=True)
class LexicalHit:
    """One tool's lexical score and the query words it contains (rarest first)."""

    id: str
    score: float
    words: list[str]
    pagerank: float = 0.0


@dataclass(frozen=True)
class WordIndex:
    """Postings of one database's tools: row numbers follow the ids' byte order."""

    ids: list[str]
    # word → rows of the tools containing it anywhere (C weight for every match)
    postings: dict[str, np.ndarray]
    # word → (rows whose name or server holds it, extra weight of each: name A, else B)
    bonus: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    known: frozenset[str] = frozenset()  # the ids, for membership
    # Per row, the plain words of each of ``FIELDS``.
    fields: list[dict[str, frozenset[str]]] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)  # id → row

    @property
    def total(self) -> int:
        return len(self.ids)

    def frequency(self, word: str) -> int:
        rows = self.postings.get(word)
        return 0 if rows is None else len(rows)

    def search(self, *, words: Sequence[str], limit: int) -> list[LexicalHit]:
        """Top ``limit`` tools by summed idf * field weight, ties by id."""
        kept = [
            w
            for w in dict.fromkeys(words)
            if 0 < self.frequency(w) <= max(1, MAX_DOC_FRACTION * self.total)
        ]
        if not kept:
            return []
        weights = {w: idf(total=self.total, frequency=self.frequency(w)) for w in kept}
        kept.sort(key=lambda w: (-weights[w], w))
        scores = np.zeros(self.total)
        # Description weight for every match first, then the name/server extras, rarest
        # word first: the order the former SQL summed in, so equal tools stay equal.
        for w in kept:
            scores[self.postings[w]] += weights[w] * FIELD_WEIGHTS["C"]
        for w in kept:
            if w in self.bonus:
                rows, extra = self.bonus[w]
                scores[rows] += weights[w] * extra
        matched = np.flatnonzero(scores)
        top = matched[np.lexsort((matched, -scores[matched]))][:limit]
        contains = {w: _contains(self.postings[w], top) for w in kept}
        return [
            LexicalHit(
                id=self.ids[row],
                score=float(scores[row]),
                words=[w for w in kept if contains[w][i]],
            )
            for i, row in enumerate(top.tolist())
        ]

    def coverage(self, *, words: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, float]]:
        """Per tool id, per field: the share of the query's information (Σ idf of the query
        words any tool holds) that the field holds, in [0, 1]. Tools without a match are absent.

        Unlike ``search``, common words are kept: in a short request over a small
        catalogue ("list the files") the common word may be the only one. Words no tool
        holds count in the query's information too (at the largest idf): otherwise in
        "remember that Alice works at Acme" the one word the catalogue knows, "work" (of
        "working directory"), was all of it and gave every filesystem tool full coverage.
        """
        query = list(dict.fromkeys(words))
        known = [w for w in query if self.frequency(w) > 0]
        weights = {w: idf(total=self.total, frequency=self.frequency(w)) for w in known}
        unknown = idf(total=self.total, frequency=0) * (len(query) - len(known))
        total = sum(weights.values()) + unknown
        out: dict[str, dict[str, float]] = {}
        if not total:
            return out
        for tool_id in ids:
            row = self.rows.get(tool_id)
            if row is None:
                continue
            per_field = {
                name: sum(weights[w] for w in known if w in words_of) / total
                for name, words_of in self.fields[row].items()
            }
            if any(per_field.values()):
                out[tool_id] = per_field
        return out

    def matched(
        self, *, words: Sequence[str], ids: Sequence[str]
    ) -> dict[str, dict[str, list[str]]]:
        """Per tool id, per field: the query words that field holds (for ``why``)."""
        query = list(dict.fromkeys(words))
        out: dict[str, dict[str, list[str]]] = {}
        for tool_id in ids:
            row = self.rows.get(tool_id)
            if row is None:
                continue
            found = {
                name: [w for w in query if w in words_of]
                for name, words_of in self.fields[row].items()
            }
            if any(found.values()):
                out[tool_id] = {name: ws for name, ws in found.items() if ws}
        return out


def _contains(sorted_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` are in ``sorted_rows`` (postings are built in ascending order)."""
    at = np.minimum(np.searchsorted(sorted_rows, rows), len(sorted_rows) - 1)
    return np.asarray(sorted_rows[at] == rows)


def build_index(*, rows: Sequence[Any]) -> WordIndex:
    """A ``WordIndex`` from ``_WORDS_SQL`` rows (sorted by id)."""
    postings: dict[str, list[int]] = {}
    bonus: dict[str, tuple[list[int], list[float]]] = {}
    a_extra = FIELD_WEIGHTS["A"] - FIELD_WEIGHTS["C"]
    b_extra = FIELD_WEIGHTS["B"] - FIELD_WEIGHTS["C"]
    ids: list[str] = []
    fields: list[dict[str, frozenset[str]]] = []
    for row_number, row in enumerate(rows):
        ids.append(row["id"])
        fields.append(
            {name: frozenset(lexeme_words(row.get(f"in_{name}") or [])) for name in FIELDS}
        )
        for word in row["words"] or []:
            postings.setdefault(word, []).append(row_number)
        in_name = set(row["in_name"] or [])
        for word in row["in_name_or_server"] or []:
            rows_of, extras = bonus.setdefault(word, ([], []))
            rows_of.append(row_number)
            extras.append(a_extra if word in in_name else b_extra)
    return WordIndex(
        ids=ids,
        known=frozenset(ids),
        fields=fields,
        rows={tool_id: i for i, tool_id in enumerate(ids)},
        postings={w: np.asarray(r, dtype=np.int64) for w, r in postings.items()},
        bonus={
            w: (np.asarray(r, dtype=np.int64), np.asarray(e, dtype=np.float64))
            for w, (r, e) in bonus.items()
        },
    )


def load_index(conn: psycopg.Connection[Any]) -> WordIndex:
    """Every tool's words, read now."""
    return build_index(rows=[_as_dict(r) for r in conn.execute(_WORDS_SQL).fetchall()])


# Reloaded when ``search_state.tools_version`` moves.
WORD_INDEXES = VersionedCache(load_index)


def words_of_row(row: Any) -> list[str]:
    """The query's stemmed words from a row of ``QUERY_LEXEMES_SQL``, split to plain words."""
    lexemes = _get(row, "lexemes", 0) if row else []
    return lexeme_words(lexemes or [])


def version_of_row(row: Any) -> Any:
    """The tools' word version from a row of ``QUERY_LEXEMES_SQL``."""
    return _get(row, "version", 1) if row else None


def idf(*, total: int, frequency: int) -> float:
    """BM25's smoothed inverse document frequency (always > 0)."""
    return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))


def lexical_tool_search(
    conn: psycopg.Connection[Any], *, query: str, limit: int
) -> list[LexicalHit]:
    """Top ``limit`` tools by summed idf * field weight of the query words they contain."""
    row = conn.execute(QUERY_LEXEMES_SQL, (query,)).fetchone()
    index = WORD_INDEXES.get(conn, version=version_of_row(row))
    return index.search(words=words_of_row(row), limit=limit)


def _get(row: Any, key: str, index: int) -> Any:
    # Works with dict rows (the project default) and tuple rows alike.
    return row[key] if isinstance(row, dict) else row[index]


def _as_dict(row: Any) -> dict[str, Any]:
    if isinstance(row, dict):
        return row
    names = ("id", "words", "in_name", "in_name_or_server", "in_server", "in_description")
    return dict(zip((*names, "in_params"), row, strict=False))
