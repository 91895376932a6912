"""Policy files: errors placed by file and line, the facts the engine is asked about, and
decisions (a forbid's id, Cedar's default deny, a reload that keeps the last good set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.approvals import rules
from shared.auth.principal import Principal
from shared.errors import PolicyInvalid
from shared.policy import engine as engine_module
from shared.policy.engine import NO_POLICY_PERMITS, PolicyEngine
from shared.policy.facts import Action, Caller, cedar_record, tool_entity
from shared.policy.source import read_policy_file, split_statements

GOOD = """// writes stay in the scratch directory
@id("scratch-writes")
permit(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"fs:write_file")
  when { context.args has path && context.args.path like "/srv/scratch/*" };

@id("no-big-payments")
forbid(principal, action == AgentCards::Action::"call_tool", resource)
  when { context.args has amount && context.args.amount > 1000 };

permit(principal in AgentCards::Group::"engineers", action == AgentCards::Action::"call_tool", resource)
  when { resource.read_only || resource.server == "pay" };
"""
KEY = Caller(tenant="acme", key_id="k1", key_name="ci")
ALICE = Caller(tenant="acme", user="alice", groups=("engineers",), email="a@example.com")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.cedar"
    path.write_text(text)
    return path


def call(engine: PolicyEngine, caller: Caller, tool: str, args: dict[str, object], **hints: bool):
    annotations = {f"{k}Hint": v for k, v in hints.items()}
    return engine.decide(
        action=Action.CALL_TOOL,
        caller=caller,
        resource=tool_entity(tool, annotations),
        context={"surface": "code", "tenant": caller.tenant, "execution_id": "e1"},
        args=args,
    )


def test_decisions_name_the_policies_that_made_them(tmp_path: Path) -> None:
    engine = PolicyEngine(write(tmp_path, GOOD))
    inside = call(engine, KEY, "fs:write_file", {"path": "/srv/scratch/a.txt", "content": "x"})
    assert inside is not None and inside.allowed and inside.policies == ("scratch-writes",)
    outside = call(engine, KEY, "fs:write_file", {"path": "/etc/passwd"})
    assert outside is not None and not outside.allowed
    assert outside.policies == () and outside.reason == NO_POLICY_PERMITS
    # A permit without @id is named by the engine's number; a forbid wins over it.
    small = call(engine, ALICE, "pay:send", {"amount": 50})
    assert small is not None and small.allowed and small.policies == ("policy2",)
    big = call(engine, ALICE, "pay:send", {"amount": 5000})
    assert big is not None and not big.allowed and big.policies == ("no-big-payments",)
    # Not in the group: nothing permits it. An unannotated tool is not read-only.
    assert not call(engine, KEY, "pay:send", {"amount": 5}).allowed  # type: ignore[union-attr]
    assert call(engine, ALICE, "db:query", {}, readOnly=True).allowed  # type: ignore[union-attr]
    assert not call(engine, ALICE, "db:query", {}).allowed  # type: ignore[union-attr]


def test_no_policy_file_decides_nothing() -> None:
    assert call(PolicyEngine(None), KEY, "fs:write_file", {"path": "/etc/x"}) is None


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('permit(principal, action, resource);\n\npermit(principal, action, resource)\n  when { true ;\n', 4, "unexpected token"),
        ('permit(principal, action, resource);\nforbid(principal, action == AgentCards::Action::"call_tool", resource)\n  when { resource.colour == "red" };\n', 2, "colour"),
        ('permit(principal, action == AgentCards::Action::"fly", resource);\n', 1, "fly"),
        ('permit(principal, action, resource);\n@id("pay")\n@approval("yes")\npermit(principal, action, resource);\n', 2, 'the one value is "required"'),
        ('permit(principal, action, resource);\n@approval("required")\nforbid(principal, action, resource);\n', 2, "belongs on a permit"),
        ('@approvers("ops")\npermit(principal, action, resource);\n', 1, "needs @approval"),
        ('@approval("required")\n@approvers(" , ")\npermit(principal, action, resource);\n', 1, "names no one"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_with_its_line_and_the_engines_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PolicyInvalid) as refused:
        read_policy_file(path)
    assert refused.value.details["line"] == line, refused.value.message
    assert refused.value.message.startswith(f"{path}:{line}: ")
    assert reason in refused.value.details["reason"]


def test_statements_are_cut_outside_strings_and_comments() -> None:
    text = '// a; comment\npermit(principal, action, resource) when { "a;b" == "a;b" };\n\nforbid(principal, action, resource);'
    assert [line for line, _ in split_statements(text)] == [2, 4]


def test_a_changed_file_is_reloaded_and_a_bad_one_keeps_the_last_good_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "CHECK_EVERY_S", 0.0)
    path = write(tmp_path, GOOD)
    engine = PolicyEngine(path)
    assert call(engine, ALICE, "db:query", {}, readOnly=True).allowed  # type: ignore[union-attr]
    path.write_text('@id("nothing")\nforbid(principal, action, resource);\n')
    os.utime(path, ns=(1, 1))  # a different mtime even within the clock's resolution
    denied = call(engine, ALICE, "db:query", {}, readOnly=True)
    assert denied is not None and denied.policies == ("nothing",)
    path.write_text("permit(principal, action, resource) when {")
    with pytest.raises(PolicyInvalid):
        engine.reload()
    assert engine.last_error is not None and f"{path}:1:" in engine.last_error
    assert call(engine, ALICE, "db:query", {}).policies == ("nothing",)  # type: ignore[union-attr]


def test_an_empty_file_is_never_a_set_that_permits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Truncated in place, the file keeps the last good set (and says why); a process never
    starts on it; a set that permits nothing is a file holding only a comment."""
    monkeypatch.setattr(engine_module, "CHECK_EVERY_S", 0.0)
    path = write(tmp_path, GOOD)
    engine = PolicyEngine(path)
    path.write_text(" \n")
    os.utime(path, ns=(1, 1))
    assert call(engine, ALICE, "db:query", {}, readOnly=True).allowed  # type: ignore[union-attr]
    assert engine.last_error is not None and "it is empty" in engine.last_error
    with pytest.raises(PolicyInvalid, match="it is empty"):
        PolicyEngine(path)
    path.write_text("// nothing is permitted\n")
    os.utime(path, ns=(2, 2))
    denied = call(engine, ALICE, "db:query", {}, readOnly=True)
    assert denied is not None and not denied.allowed and denied.reason == "no policy permits"


def test_which_tools_policies_decide_by_the_calls_arguments(tmp_path: Path) -> None:
    """What lets a cached result stand for a call made now (gateway ``cache_clearance``): no
    policy that can apply to the tool reads the call's arguments or execution."""
    action, tool = (
        str(Action.CALL_TOOL),
        'AgentCards::Action::"call_tool", resource == AgentCards::Tool',
    )
    text = (
        f'permit(principal, action == {tool}::"fs:write_file") when {{ context.args has path }};\n'
        f'permit(principal, action == {tool}::"db:query") when {{ context.execution_id != "" }};\n'
        f'permit(principal, action == {tool}::"db:read") when {{ resource.read_only }};\n'
    )
    loaded = PolicyEngine(write(tmp_path, text)).loaded
    assert loaded is not None
    assert loaded.index.reads_the_call(action, tool_entity("fs:write_file", None)["uid"])
    assert loaded.index.reads_the_call(action, tool_entity("db:query", None)["uid"])
    assert not loaded.index.reads_the_call(action, tool_entity("db:read", None)["uid"])
    everywhere = PolicyEngine(write(tmp_path, GOOD)).loaded  # a forbid on every tool's amount
    assert everywhere is not None
    assert everywhere.index.reads_the_call(action, tool_entity("db:read", None)["uid"])


def test_arguments_become_a_cedar_record() -> None:
    record = cedar_record(
        {"n": 3, "x": 1.5, "none": None, "tags": ["a", None, 2], "deep": {"k": True}, "big": 2**70}
    )
    assert record["n"] == 3 and record["tags"] == ["a", 2] and record["deep"] == {"k": True}
    assert record["x"] == {"__extn": {"fn": "decimal", "arg": "1.5000"}}
    assert "none" not in record and "big" not in record  # beyond decimal's range too
    hints = tool_entity("fs:write_file", None)["attrs"]
    assert hints == {"server": "fs", "name": "write_file", "read_only": False,
                     "destructive": True, "idempotent": False, "open_world": True}  # fmt: skip


def test_the_subset_evaluated_decides_as_the_whole_file(tmp_path: Path) -> None:
    """Each decision runs on the policies whose scope can apply (shared.policy.index): the
    same answer, and the same deciding ids, as the engine on the whole file."""
    import cedarpy

    from deploy.bench.policy import policy_text
    from shared.policy.facts import action_uid

    text = (
        GOOD
        + policy_text(60)
        + (
            'permit(principal, action in [AgentCards::Action::"execute_code"], resource);\n'
            "forbid(principal, action, resource is AgentCards::Language)"
            ' when { principal is AgentCards::Key && principal.name == "x" };\n'
        )
    )
    engine = PolicyEngine(write(tmp_path, text))
    whole = cedarpy.PolicySet.from_str(text)
    cases = [
        (Action.CALL_TOOL, tool_entity("fs:write_file", None), {"path": "/srv/scratch/a"}),
        (Action.CALL_TOOL, tool_entity("_bench:pay", None), {"amount": 500}),
        (Action.CALL_TOOL, tool_entity("srv7:write", None), {"path": "/srv/7/a", "amount": 9}),
        (Action.CALL_TOOL, tool_entity("srv8:x", {"readOnlyHint": True}), {"amount": 9}),
        (
            Action.EXECUTE_CODE,
            {"uid": {"type": "AgentCards::Language", "id": "python"}, "attrs": {}, "parents": []},
            {},
        ),
    ]
    for caller in (KEY, ALICE, Caller(tenant="acme", key_id="k2", key_name="x")):
        for action, resource, args in cases:
            context = {"surface": "code", "tenant": "acme", "execution_id": "e1"}
            decision = engine.decide(
                action=action, caller=caller, resource=resource, context=context, args=args
            )
            request = {
                "principal": caller.uid(),
                "action": action_uid(action),
                "resource": resource["uid"],
                "context": {**context, "args": cedar_record(args)},
            }
            expected = cedarpy.is_authorized(request, whole, [*caller.entities(), resource])
            assert decision is not None and decision.allowed == expected.allowed
            loaded = engine.loaded
            assert loaded is not None
            assert decision.policies == tuple(
                loaded.name_of(r) for r in expected.diagnostics.reasons
            ), (caller, action, resource["uid"])


APPROVALS = """
@id("pay-small")
permit(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"pay:send");

@id("pay-over-100-asks")
@approval("required")
@approvers("finance, ci")
permit(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"pay:send")
  when { context.args has amount && context.args.amount > 100 };
"""


def test_a_permit_with_approval_pauses_the_calls_it_decides(tmp_path: Path) -> None:
    engine = PolicyEngine(write(tmp_path, APPROVALS))
    small = call(engine, KEY, "pay:send", {"amount": 50})
    assert small is not None and small.allowed and small.approval is None
    # Another permit deciding too does not lift the approval: one asking is enough.
    big = call(engine, KEY, "pay:send", {"amount": 500})
    assert big is not None and big.allowed and big.approval is not None
    assert big.approval.policies == ("pay-over-100-asks",)
    assert big.approval.approvers == ("finance", "ci")


def test_who_may_answer_an_approval() -> None:
    row = {"tenant_id": "t", "approvers": [], "caller_key": "k1", "caller_user": None}
    admin = Principal(tenant_id="t", key_id="k2", key_name="boss", admin=True)
    plain = Principal(tenant_id="t", key_id="k3", key_name="ci", admin=False)
    caller = Principal(tenant_id="t", key_id="k1", key_name="me", admin=True)
    assert rules.refusal(row, admin) is None
    assert "admin" in (rules.refusal(row, plain) or "")
    assert "caller" in (rules.refusal(row, caller) or "")  # an admin, but the caller
    named = {**row, "approvers": ["finance", "ci"]}
    finance = Principal(tenant_id="t", user="ann", groups=("finance",), admin=False)
    reader = Principal(tenant_id="t", user="bob", groups=("readers",), admin=True)
    assert rules.refusal(named, finance) is None and rules.refusal(named, plain) is None
    assert "finance, ci" in (rules.refusal(named, reader) or "")
    assert rules.refusal({**named, "approvers": ["caller"]}, caller) is None
    assert rules.approver_name(finance) == "user:ann" and rules.approver_name(admin) == "key:boss"
    # The inbox names who asked as answers name who answered (a key by name when known).
    assert rules.caller_name({**row, "caller_key_name": "payer"}) == "key:payer"
    assert rules.caller_name(row) == "key:k1"
    assert rules.caller_name({**row, "caller_user": "ann"}) == "user:ann"
