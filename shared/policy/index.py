"""The policies that can apply to one (action, resource), as a set the engine evaluates.

Cedar evaluates every policy of the set it is given, and the binding copies the set on each
call, so a decision costs time in proportion to the file. A policy whose scope names other
actions, or another resource (``resource == …``, ``resource is <other type>``), cannot
apply, so each (action, resource) gets the subset that can, read from the engine's own JSON
form of each policy's scope and built once (policy ids kept: the engine's ``policyN`` and
``@id`` annotations name the same policies as in the whole file). Anything else in a scope
(``in`` a hierarchy, a principal constraint) keeps the policy in: the subset is never
smaller than what could apply, so decisions are the same as on the whole file.
"""

from __future__ import annotations

import threading
from typing import Any

import cedarpy
import orjson

# Distinct (action, resource) pairs kept: tools times actions on a large stack; beyond it
# the cache starts again (a subset is rebuilt in O(policies) at its next use).
MAX_SUBSETS = 4096


class PolicyIndex:
    """The subsets of one loaded policy file, built on first use; thread-safe."""

    def __init__(self, static: dict[str, Any]) -> None:
        self._static = static
        self._subsets: dict[tuple[str, str, str], cedarpy.PolicySet] = {}
        self._reads: dict[tuple[str, str, str], bool] = {}
        self._lock = threading.Lock()

    def subset(self, action: str, resource: dict[str, str]) -> cedarpy.PolicySet:
        """The policies that can apply to ``action`` (its id) on ``resource`` (a uid)."""
        key = (action, resource["type"], resource["id"])
        found = self._subsets.get(key)
        if found is not None:
            return found
        kept = self._may_apply(action, resource)
        document = {"staticPolicies": kept, "templates": {}, "templateLinks": []}
        built = cedarpy.PolicySet.from_json_str(orjson.dumps(document).decode())
        with self._lock:
            if len(self._subsets) >= MAX_SUBSETS:
                self._subsets.clear()
            self._subsets[key] = built
        return built

    def reads_the_call(self, action: str, resource: dict[str, str]) -> bool:
        """Whether a policy that can apply to ``action`` on ``resource`` reads what only one
        call has (its ``args``, its ``execution_id``): then no decision made without the call
        stands for it (a cached result's calls: ``ops/policy.py``). Read from each policy's
        conditions as the engine gives them, erring towards yes."""
        key = (action, resource["type"], resource["id"])
        found = self._reads.get(key)
        if found is None:
            found = any(
                any(name in orjson.dumps(p.get("conditions") or []) for name in _PER_CALL)
                for p in self._may_apply(action, resource).values()
            )
            with self._lock:
                if len(self._reads) >= MAX_SUBSETS:
                    self._reads.clear()
                self._reads[key] = found
        return found

    def _may_apply(self, action: str, resource: dict[str, str]) -> dict[str, Any]:
        return {
            pid: policy
            for pid, policy in self._static.items()
            if _action_may_apply(policy.get("action") or {}, action)
            and _resource_may_apply(policy.get("resource") or {}, resource)
        }


# The context of one call alone, as policy conditions name it (a string anywhere in them:
# an attribute, a `has`, a literal; a false yes only costs a cache hit).
_PER_CALL = (b'"args"', b'"execution_id"')


def _action_may_apply(scope: dict[str, Any], action: str) -> bool:
    op = scope.get("op")
    if op == "==":
        return bool(scope.get("entity", {}).get("id") == action)
    if op == "in" and "entities" in scope:
        return any(e.get("id") == action for e in scope["entities"])
    if op == "in" and "entity" in scope:  # the shipped schema declares no action groups
        return bool(scope["entity"].get("id") == action)
    return True  # All, or anything this reading does not know: kept


def _resource_may_apply(scope: dict[str, Any], resource: dict[str, str]) -> bool:
    op = scope.get("op")
    if op == "==":
        entity = scope.get("entity", {})
        return bool(entity.get("type") == resource["type"] and entity.get("id") == resource["id"])
    if op == "is":
        return bool(scope.get("entity_type") == resource["type"])
    return True  # All, `in` a hierarchy, or anything else: kept
