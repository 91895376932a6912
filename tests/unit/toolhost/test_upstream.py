"""Which execution a downstream server's sampling or elicitation request is relayed to."""

from __future__ import annotations

from services.toolhost.upstream import CallContext, InflightCalls, roots_result


def test_a_lone_call_owns_the_request() -> None:
    inflight = InflightCalls()
    call = CallContext("e1", "everything:trigger-sampling-request", "call-1")
    with inflight.track(call):
        assert inflight.owner() == call
    assert inflight.owner() == "no tool call is in flight on this server"


def test_several_calls_of_one_execution_name_the_execution_only() -> None:
    inflight = InflightCalls()
    with (
        inflight.track(CallContext("e1", "s:a", "call-1")),
        inflight.track(CallContext("e1", "s:b", "call-2")),
    ):
        owner = inflight.owner()
    assert isinstance(owner, CallContext)
    assert (owner.execution_id, owner.trace_call_id) == ("e1", None)


def test_calls_of_two_executions_make_the_request_ambiguous() -> None:
    inflight = InflightCalls()
    with inflight.track(CallContext("e1", "s:a")), inflight.track(CallContext("e2", "s:a")):
        owner = inflight.owner()
    assert isinstance(owner, str) and "2 executions" in owner


def test_roots_are_named_by_their_last_path_part() -> None:
    result = roots_result(["file:///srv/data/", "file:///home/ada"])
    assert [(str(r.uri), r.name) for r in result.roots] == [
        ("file:///srv/data/", "data"),
        ("file:///home/ada", "ada"),
    ]


def test_a_request_outside_any_execution_makes_a_server_request_nobodys() -> None:
    """A question asked while a prompts/get is in flight may be the prompt's: it must not reach
    the client of the one execution that happens to have a call in flight too."""
    inflight = InflightCalls()
    with inflight.track(CallContext("e1", "s:ask", "call-1")):
        with inflight.track_request("prompts/get"):
            owner = inflight.owner()
            assert isinstance(owner, str) and "prompts/get" in owner
        assert inflight.owner() == CallContext("e1", "s:ask", "call-1")
    with inflight.track_request("resources/read"):
        assert "resources/read" in str(inflight.owner())


def test_a_request_naming_a_server_task_is_the_call_waiting_on_it() -> None:
    inflight = InflightCalls()
    waiting, other = CallContext("e1", "s:research", "call-1"), CallContext("e2", "s:a")
    with inflight.track(waiting), inflight.track(other), inflight.task("task-9", waiting):
        assert isinstance(inflight.owner(), str)  # two executions: a bare request is nobody's
        assert inflight.of_task("task-9") == waiting
        assert inflight.of_task("task-8") is None and inflight.of_task(None) is None
    assert inflight.of_task("task-9") is None
