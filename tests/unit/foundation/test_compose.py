"""compose.yaml cannot run here (no Docker engine), so check what `docker compose` would rely on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
APP_SERVICES = {"gateway", "toolhost", "sandbox-worker", "learning-worker", "beat", "flower"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def test_every_process_of_the_stack_is_a_service(compose: dict[str, Any]) -> None:
    assert APP_SERVICES | {"postgres", "redis", "migrate"} <= set(compose["services"])


def test_postgres_has_pgvector_and_redis_is_durable(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    redis_cmd = services["redis"]["command"]
    assert "--appendonly yes" in redis_cmd
    assert "--maxmemory-policy noeviction" in redis_cmd


def test_every_long_running_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if name == "migrate":
            continue
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def test_app_services_wait_for_healthy_dependencies_and_migrations(compose: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        deps = compose["services"][name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy", name
        assert deps["redis"]["condition"] == "service_healthy", name
        assert deps["migrate"]["condition"] == "service_completed_successfully", name
    assert compose["services"]["migrate"]["command"] == ["agentcards", "migrate"]


def test_required_secrets_fail_loudly_when_unset(compose: dict[str, Any]) -> None:
    text = (ROOT / "compose.yaml").read_text()
    for var in (
        "POSTGRES_PASSWORD",
        "REDIS_PASSWORD",
        "AGENTCARDS_SECRET_KEY",
        "AGENTCARDS_PII_KEY",
        "FLOWER_BASIC_AUTH",
    ):
        assert re.search(r"\$\{" + var + r":\?[^}]+\}", text), f"{var} is not required"
    assert "changeme" not in text


def test_sandbox_worker_can_scale(compose: dict[str, Any]) -> None:
    worker = compose["services"]["sandbox-worker"]
    # --scale fails for services with a fixed container_name or host port.
    assert "container_name" not in worker
    assert "ports" not in worker
    assert "-Q executions" in worker["command"]


@pytest.mark.parametrize("name", ["sandbox-worker", "toolhost"])
def test_scaled_services_are_correct_by_construction(compose: dict[str, Any], name: str) -> None:
    """`docker compose up --scale sandbox-worker=N --scale toolhost=M`: each replica is whole."""
    service = compose["services"][name]
    # --scale refuses a fixed container_name or host port; a fixed hostname would give
    # every replica the same Celery node name and heartbeat key.
    assert not {"container_name", "ports", "hostname"} & set(service)
    # Named volumes would be shared by the replicas: only the read-only MCP config is.
    for volume in service.get("volumes", []):
        assert volume.endswith(":ro"), f"{name} shares a writable volume: {volume}"
    command = service["command"]
    text = command if isinstance(command, str) else " ".join(command)
    if "celery" in text:  # one node name per replica (%h is the container's hostname)
        assert re.search(r"-n \S+@%h", text), text
    assert service.get("deploy", {}).get("replicas", 1) >= 1


def test_commands_name_real_modules(compose: dict[str, Any]) -> None:
    import importlib.util

    for name in APP_SERVICES:
        command = compose["services"][name]["command"]
        text = command if isinstance(command, str) else " ".join(command)
        module = re.search(r"(?:-m|-A) ([\w.]+)", text)
        assert module, f"{name}: no module in {text!r}"
        assert importlib.util.find_spec(module.group(1)), f"{name}: {module.group(1)} not found"


def test_image_is_built_from_the_project_dockerfile(compose: dict[str, Any]) -> None:
    dockerfile = ROOT / compose["services"]["gateway"]["build"]["dockerfile"]
    text = dockerfile.read_text()
    assert "torch==2.13.0" in text
    assert text.index("torch==2.13.0") < text.index("pip install .")
