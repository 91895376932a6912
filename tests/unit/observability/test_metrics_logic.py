"""Pure parts of the metrics: which limit killed a run, rates, histogram buckets."""

from __future__ import annotations

from shared import metrics
from shared.errors import ErrorType, error_dict


def test_each_sandbox_limit_is_named_by_its_kind() -> None:
    def kind(status: str, error_type: ErrorType | None) -> str | None:
        error = error_dict(error_type, "x") if error_type else None
        return metrics.limit_kind(status=status, error=error)

    assert kind("failed", ErrorType.MEMORY_LIMIT) == "memory"
    assert kind("failed", ErrorType.CPU_LIMIT) == "cpu"
    assert kind("failed", ErrorType.OUTPUT_LIMIT) == "output"
    assert kind("failed", ErrorType.TOOL_CALL_LIMIT) == "tool_calls"
    assert kind("timeout", ErrorType.TIMEOUT) == "wall"
    # Agent code that raised, or succeeded, was not killed by a limit.
    assert kind("failed", ErrorType.RUNTIME_ERROR) is None
    assert kind("succeeded", None) is None
    assert metrics.limit_kind(status="failed", error={"type": 3}) is None


def test_a_rate_before_anything_was_counted_is_zero_not_nan() -> None:
    assert metrics.ratio(0, 0) == 0.0
    assert metrics.ratio(3, 4) == 0.75


def test_histogram_buckets_are_cumulative_with_inf_last() -> None:
    family = metrics._histogram(
        "agentcards_x_seconds",
        "doc",
        (0.1, 1.0),
        [(("fs",), {"0.1": 2.0, "+Inf": 1.0, "sum": 5.5}), (("web",), {"1.0": 1.0, "sum": 0.5})],
        label="server",
    )
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
    assert samples[("agentcards_x_seconds_bucket", (("le", "1.0"), ("server", "fs")))] == 2.0
    assert samples[("agentcards_x_seconds_bucket", (("le", "+Inf"), ("server", "fs")))] == 3.0
    assert samples[("agentcards_x_seconds_count", (("server", "fs"),))] == 3.0
    assert samples[("agentcards_x_seconds_sum", (("server", "fs"),))] == 5.5
    assert samples[("agentcards_x_seconds_count", (("server", "web"),))] == 1.0


def test_every_declared_name_is_unique_across_kinds() -> None:
    names = [
        *metrics.COUNTERS,
        *metrics.GAUGES,
        *metrics.LABELLED_COUNTERS,
        *metrics.HISTOGRAMS,
        *metrics.LABELLED_HISTOGRAMS,
    ]
    assert len(names) == len(set(names))


def test_a_label_value_joins_its_histograms_set_once_a_while_its_samples_every_time() -> None:
    sent = metrics.LabelsSent(every_s=3600)

    def commands(label: str) -> list[str]:
        observed = metrics.observation_commands(
            "tool_call_latency_seconds", 0.003, label=label, labels=sent
        )
        return [str(command[0]) for command in observed]

    assert commands("time") == ["SADD", "HINCRBY", "HINCRBYFLOAT"]
    assert commands("time") == ["HINCRBY", "HINCRBYFLOAT"]
    assert commands("memory") == ["SADD", "HINCRBY", "HINCRBYFLOAT"]  # each value on its own
    again = metrics.LabelsSent(every_s=0)  # past the interval: added again
    assert again.due("tool_call_latency_seconds", "time")
    assert again.due("tool_call_latency_seconds", "time")
