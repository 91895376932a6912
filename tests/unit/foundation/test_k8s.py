"""deploy/k8s cannot run here (no cluster): validate each manifest against the bundled schemas
and check what a rollout relies on: one beat, the MCP config on toolhosts, secrets by reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30.0"  # appArmorProfile in securityContext is GA from 1.30
PROCESSES = {"gateway", "toolhost", "sandbox-worker", "learning-worker", "beat", "flower"}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


DOCUMENTS = _documents()


def _deployments() -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["labels"]["app.kubernetes.io/name"]: doc
        for _, doc in DOCUMENTS
        if doc["kind"] == "Deployment"
    }


@pytest.mark.parametrize(("where", "doc"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_every_manifest_is_valid_against_the_kubernetes_schema(
    where: str, doc: dict[str, Any]
) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_an_invalid_manifest_is_refused() -> None:
    """The check has teeth: a misspelled field fails strict validation."""
    _, doc = next((w, d) for w, d in DOCUMENTS if d["kind"] == "Deployment")
    broken = yaml.safe_load(yaml.safe_dump(doc))
    broken["spec"]["replicaz"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_every_process_of_the_stack_has_a_deployment() -> None:
    assert set(_deployments()) == PROCESSES
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in DOCUMENTS}
    assert ("Service", "agentcards-gateway") in kinds
    assert ("Job", "agentcards-migrate") in kinds


def test_exactly_one_beat_even_during_a_rollout() -> None:
    beat = _deployments()["beat"]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"


def test_urls_come_from_a_secret_reference_never_a_literal() -> None:
    for _, doc in DOCUMENTS:
        assert doc["kind"] != "Secret", "ship no Secret: the operator creates it"
    for name, deployment in _deployments().items():
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert {"secretRef": {"name": "agentcards"}} in container["envFrom"], name
        literal = {e["name"] for e in container.get("env", [])}
        assert not literal & {"AGENTCARDS_DATABASE_URL", "AGENTCARDS_REDIS_URL"}, name


def test_toolhosts_mount_the_mcp_config_the_settings_name() -> None:
    toolhost = _deployments()["toolhost"]["spec"]["template"]["spec"]
    env = next(d for _, d in DOCUMENTS if d["metadata"]["name"] == "agentcards-env")
    mounted = toolhost["containers"][0]["volumeMounts"][0]["mountPath"]
    volume = toolhost["volumes"][0]["configMap"]["name"]
    mcp = next(d for _, d in DOCUMENTS if d["metadata"]["name"] == volume)
    filename = Path(env["data"]["AGENTCARDS_MCP_CONFIG"])
    assert str(filename.parent) == mounted and filename.name in mcp["data"]


def test_only_the_sandbox_worker_holds_privileges_and_never_privileged_mode() -> None:
    for name, deployment in _deployments().items():
        pod = deployment["spec"]["template"]["spec"]
        assert not pod.get("hostPID") and not pod.get("hostNetwork"), name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert not context.get("privileged"), name
            assert context["capabilities"]["drop"] == ["ALL"], name
            added = set(context["capabilities"].get("add", []))
            if name == "sandbox-worker":
                assert added == {"SYS_ADMIN", "SETUID", "SETGID", "KILL"}
                assert context["seccompProfile"]["type"] == "RuntimeDefault"
            else:
                assert not added, name
                assert context["allowPrivilegeEscalation"] is False, name
                assert pod["securityContext"]["runAsNonRoot"] is True, name


def test_commands_are_the_cli_s_join_commands() -> None:
    from deploy.cli.main import app

    commands = {
        c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands
    }
    for name, deployment in _deployments().items():
        argv = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
        text = " ".join(argv)
        if "agentcards " in text:
            word = text.split("agentcards ", 1)[1].split()[0]
            assert word in commands, f"{name}: `agentcards {word}` does not exist"
