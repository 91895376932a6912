"""Edge kinds and their weights: how much one observation of each kind says about relatedness."""

from __future__ import annotations

import math
from enum import StrEnum


class EdgeKind(StrEnum):
    """The ``tool_edges.kind`` values (the table's CHECK constraint lists the same four)."""

    SEQUENCE = "sequence"  # tool A's call was followed by tool B's, same parent
    CO_USED = "co_used"  # A and B were called in the same execution (stored once, src < dst)
    CONTAINS = "contains"  # capability → a tool it called
    CALLS = "calls"  # capability → an inline capability it called


# Per-observation weight by kind:
# - sequence 1.0: ordered, adjacent calls are the most direct evidence of a workflow
#   step, which is what "what comes next" suggestions need;
# - calls 1.0: one capability invoking another is just as explicit;
# - contains 0.8: structural (a capability's own tools), strong but it repeats what
#   `tools_used` already says, so it should not outrank observed sequences;
# - co_used 0.5: unordered and quadratic in the tools per run (10 tools → 45 pairs),
#   so each pair says less.
KIND_WEIGHTS: dict[EdgeKind, float] = {
    EdgeKind.SEQUENCE: 1.0,
    EdgeKind.CALLS: 1.0,
    EdgeKind.CONTAINS: 0.8,
    EdgeKind.CO_USED: 0.5,
}


def edge_weight(*, kind: EdgeKind | str, count: int) -> float:
    """``tool_edges.weight`` for an edge seen ``count`` times: kind weight * (1 + ln count).

    Logarithmic so one loop calling A→B a thousand times cannot drown the rest of
    the graph; in SQL: ``kind_weight * (1 + ln(count))`` after adding the new count.
    """
    if count <= 0:
        return 0.0
    return KIND_WEIGHTS[EdgeKind(kind)] * (1.0 + math.log(count))
