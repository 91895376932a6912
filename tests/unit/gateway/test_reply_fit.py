"""MCP replies are cut to the cap however their text escapes, and pages rebuild a part exactly."""

from __future__ import annotations

import json

import pytest

from services.gateway.mcp.fit import fit, reply_bytes
from shared.errors import ValidationFailed
from shared.executions.models import ExecutionView, ToolCallView
from shared.executions.pages import page_of, part_text

CAP = 64 << 10


def _view(**fields: object) -> ExecutionView:
    return ExecutionView(id="e1", status="succeeded", **fields)  # type: ignore[arg-type]


def test_a_small_reply_is_left_whole() -> None:
    data = _view(result={"a": 1}, stdout="hi\n").model_dump(mode="json")
    assert fit(data, max_bytes=CAP, execution_id="e1") == data


@pytest.mark.parametrize("char", ["\x01", '"', "\n", "é", "x"])
def test_stdout_that_escapes_many_fold_still_fits_and_is_a_true_prefix(char: str) -> None:
    stdout = char * 300_000
    fitted = fit(_view(stdout=stdout).model_dump(mode="json"), max_bytes=CAP, execution_id="e1")
    assert reply_bytes(fitted) <= CAP
    [cut] = fitted["truncated"]["parts"]
    assert cut["part"] == "stdout" and cut["total_bytes"] == len(stdout.encode())
    assert stdout.encode()[: cut["inline_bytes"]].decode() == fitted["stdout"] != ""


def test_the_largest_part_goes_first_and_the_rest_stays() -> None:
    calls = [ToolCallView(tool="time:get_current_time", ok=True, duration_ms=1.0)] * 50
    view = _view(result=["r" * 100] * 2000, tool_calls=calls, stdout="done\n")
    fitted = fit(view.model_dump(mode="json"), max_bytes=CAP, execution_id="e1")
    assert fitted["result"] is None and len(fitted["tool_calls"]) == 50
    assert fitted["stdout"] == "done\n"
    assert [p["part"] for p in fitted["truncated"]["parts"]] == ["result"]
    assert (
        "get_execution(execution_id='e1', part='result', offset=0"
        in (fitted["truncated"]["message"])
    )


def test_pages_join_to_the_parts_text_without_splitting_a_character() -> None:
    view = _view(result={"k": ["é€𝄞" * 333, 1.5, None]}, stdout="ü" * 5000)
    for part in ("result", "stdout"):
        text, offset, pages = part_text(view, part), 0, []
        while offset is not None:
            page = page_of(text, part=part, offset=offset, max_bytes=1001)  # type: ignore[arg-type]
            assert len(page.text.encode()) <= 1001
            pages.append(page.text)
            offset = page.next_offset
        assert "".join(pages) == text
    assert json.loads(part_text(view, "result")) == view.result


def test_an_offset_inside_a_character_or_past_the_end_is_refused_by_name() -> None:
    with pytest.raises(ValidationFailed, match="falls inside a character of stdout"):
        page_of("é", part="stdout", offset=1, max_bytes=10)
    with pytest.raises(ValidationFailed, match="outside stdout"):
        page_of("é", part="stdout", offset=3, max_bytes=10)
