"""deploy/k8s cannot run here (no cluster): render every overlay with kustomize, validate each
resource strictly against the Kubernetes schemas (kubernetes-validate's bundled ones, offline)
and KEDA's against KEDA's own, and check what a rollout relies on: one beat, probes, sizes,
disruption budgets, network policies around every pod, secrets by reference, the migration
before serving, and no privilege outside the sandbox worker."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.integration.mcp_servers import NPM_PREFIX

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSIONS = ("1.35.0", "1.37.0")
PROCESSES = {"gateway", "toolhost", "sandbox-worker", "learning-worker", "beat", "flower"}
Doc = dict[str, Any]


def render(overlay: str) -> list[Doc]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to render the overlays (kubectl kustomize)"
    out = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    return [doc for doc in yaml.safe_load_all(out) if doc]


RENDERED = {overlay: render(overlay) for overlay in OVERLAYS}


def _of(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _deployments(docs: list[Doc]) -> dict[str, Doc]:
    return {
        d["metadata"]["labels"]["app.kubernetes.io/name"]: d
        for d in _of(docs, "Deployment").values()
    }


def _pods(docs: list[Doc]) -> list[tuple[str, Doc]]:
    """Every pod template: Deployments' and the Job's."""
    return [
        (d["metadata"]["name"], d["spec"]["template"])
        for d in docs
        if d["kind"] in ("Deployment", "Job")
    ]


def _autoscaled(docs: list[Doc]) -> dict[str, int]:
    """Deployment name -> the minimum replicas its autoscaler (HPA or KEDA) keeps."""
    scaled = {
        h["spec"]["scaleTargetRef"]["name"]: h["spec"].get("minReplicas", 1)
        for h in _of(docs, "HorizontalPodAutoscaler").values()
    }
    scaled |= {
        s["spec"]["scaleTargetRef"]["name"]: s["spec"].get("minReplicaCount", 0)
        for s in _of(docs, "ScaledObject").values()
    }
    return scaled


def test_the_overlays_people_choose_from_exist() -> None:
    assert set(OVERLAYS) == {"production", "without-keda", "single-node"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_resource_is_valid_against_the_kubernetes_schema(
    overlay: str, version: str
) -> None:
    for doc in RENDERED[overlay]:
        if doc["apiVersion"].startswith("keda.sh/"):
            continue  # a CRD: checked against KEDA's schema below
        kubernetes_validate.validate(doc, version, strict=True)


def _keda_errors(docs: list[Doc]) -> list[str | None]:
    node = shutil.which("node")
    assert node, "node is needed to check KEDA resources against KEDA's schema"
    done = subprocess.run(
        [node, str(Path(__file__).with_name("keda_validate.mjs")), str(NPM_PREFIX)],
        input=json.dumps(docs), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    errors: list[str | None] = json.loads(done.stdout)
    return errors


def test_keda_resources_are_valid_against_keda_s_own_schema() -> None:
    keda = [d for d in RENDERED["production"] if d["apiVersion"].startswith("keda.sh/")]
    assert {d["kind"] for d in keda} == {"ScaledObject", "TriggerAuthentication"}
    assert _keda_errors(keda) == [None] * len(keda)
    broken = json.loads(json.dumps(next(d for d in keda if d["kind"] == "ScaledObject")))
    broken["spec"]["triggers"][0]["metadata"]["listLength"] = 2  # the check has teeth
    (error,) = _keda_errors([broken])
    assert error and "listLength" in error


def test_an_invalid_manifest_is_refused() -> None:
    """The check has teeth: a misspelled field fails strict validation."""
    doc = next(iter(_of(RENDERED["production"], "Deployment").values()))
    broken = yaml.safe_load(yaml.safe_dump(doc))
    broken["spec"]["replicaz"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)


def test_the_sandbox_workers_scale_on_the_execution_queue_or_on_cpu() -> None:
    (scaled,) = _of(RENDERED["production"], "ScaledObject").values()
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == "executions"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "agentcards-sandbox-worker"
    assert scaled["spec"]["minReplicaCount"] >= 1, "the gateway is ready only with a live worker"
    fallback = _of(RENDERED["without-keda"], "HorizontalPodAutoscaler")
    assert fallback["agentcards-sandbox-worker"]["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    for overlay in ("production", "without-keda"):
        assert _autoscaled(RENDERED[overlay])["agentcards-gateway"] >= 2
    assert not _autoscaled(RENDERED["single-node"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_process_has_its_deployment_and_the_migration_runs_before_it_serves(
    overlay: str,
) -> None:
    docs = RENDERED[overlay]
    assert set(_deployments(docs)) == PROCESSES
    assert "agentcards-migrate" in _of(docs, "Job")
    assert {"agentcards-gateway", "agentcards-flower"} <= set(_of(docs, "Service"))
    for name, deployment in _deployments(docs).items():
        pod = deployment["spec"]["template"]["spec"]
        if name in ("beat", "flower"):
            continue  # neither reads tables: they may start before the schema is there
        (init,) = pod["initContainers"]
        assert init["command"][:3] == ["agentcards", "migrate", "--wait"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_an_autoscaled_deployment_leaves_its_count_to_the_autoscaler(overlay: str) -> None:
    docs = RENDERED[overlay]
    for name in _autoscaled(docs):
        assert "replicas" not in _of(docs, "Deployment")[name]["spec"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_exactly_one_beat_even_during_a_rollout(overlay: str) -> None:
    beat = _deployments(RENDERED[overlay])["beat"]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert "agentcards-beat" not in _autoscaled(RENDERED[overlay])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_workload_that_can_run_two_pods_has_a_disruption_budget(overlay: str) -> None:
    docs = RENDERED[overlay]
    budgets = _of(docs, "PodDisruptionBudget").values()
    scaled = _autoscaled(docs)
    for name, deployment in _of(docs, "Deployment").items():
        most = max(deployment["spec"].get("replicas", 1), scaled.get(name, 0))
        if most < 2 and name not in scaled:
            continue
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert any(
            b["spec"]["selector"]["matchLabels"].items() <= labels.items() for b in budgets
        ), f"{name}: no PodDisruptionBudget"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_probes_requests_and_a_memory_limit(overlay: str) -> None:
    for name, template in _pods(RENDERED[overlay]):
        pod = template["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            where = f"{name}/{container['name']}"
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), where
            assert "memory" in resources["limits"], where
            assert "securityContext" in container, where
            if name != "agentcards-migrate" and container in pod["containers"]:
                assert "readinessProbe" in container and "livenessProbe" in container, where


def _selects(policy: Doc, labels: dict[str, str]) -> bool:
    return policy["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_select_every_pod_and_deny_by_default(overlay: str) -> None:
    docs = RENDERED[overlay]
    policies = list(_of(docs, "NetworkPolicy").values())
    deny = [p for p in policies if not p["spec"].get("ingress") and not p["spec"].get("egress")]
    assert any(set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"} for p in deny)
    for name, template in _pods(docs):
        labels = template["metadata"]["labels"]
        assert any(_selects(p, labels) for p in deny), f"{name}: no default-deny selects it"


def _egress_ports(policies: list[Doc], labels: dict[str, str]) -> set[int]:
    ports = set()
    for policy in policies:
        if _selects(policy, labels):
            for rule in policy["spec"].get("egress", []):
                ports |= {p["port"] for p in rule.get("ports", [])}
    return ports


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_sandbox_workers_reach_only_redis_postgres_and_dns(overlay: str) -> None:
    docs = RENDERED[overlay]
    policies = list(_of(docs, "NetworkPolicy").values())
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            assert rule.get("ports"), f"{policy['metadata']['name']}: egress to every port"
    sandbox = _deployments(docs)["sandbox-worker"]["spec"]["template"]["metadata"]["labels"]
    assert _egress_ports(policies, sandbox) == {53, 5432, 6379}
    gateway = _deployments(docs)["gateway"]["spec"]["template"]["metadata"]["labels"]
    assert _egress_ports(policies, gateway) == {53, 5432, 6379, 443, 4318, 5555}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_urls_come_from_a_secret_reference_never_a_literal(overlay: str) -> None:
    docs = RENDERED[overlay]
    for doc in docs:
        assert doc["kind"] != "Secret", "ship no Secret: the operator creates it"
    for name, template in _pods(docs):
        pod = template["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            assert {"secretRef": {"name": "agentcards"}} in container["envFrom"], name
            literal = {e["name"] for e in container.get("env", [])}
            assert not literal & {"AGENTCARDS_DATABASE_URL", "AGENTCARDS_REDIS_URL"}, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_come_by_a_versioned_name_never_latest(overlay: str) -> None:
    for name, template in _pods(RENDERED[overlay]):
        pod = template["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            image = container["image"]
            assert ":" in image or "@sha256:" in image, f"{name}: {image}"
            assert not image.endswith(":latest"), f"{name}: {image}"


def test_toolhosts_mount_the_mcp_config_the_settings_name() -> None:
    docs = RENDERED["production"]
    toolhost = _deployments(docs)["toolhost"]["spec"]["template"]["spec"]
    env = _of(docs, "ConfigMap")["agentcards-env"]
    mounted = toolhost["containers"][0]["volumeMounts"][0]["mountPath"]
    volume = toolhost["volumes"][0]["configMap"]["name"]
    mcp = _of(docs, "ConfigMap")[volume]
    filename = Path(env["data"]["AGENTCARDS_MCP_CONFIG"])
    assert str(filename.parent) == mounted and filename.name in mcp["data"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_sandbox_worker_holds_privileges_and_never_privileged_mode(overlay: str) -> None:
    for name, template in _pods(RENDERED[overlay]):
        pod = template["spec"]
        assert not pod.get("hostPID") and not pod.get("hostNetwork"), name
        assert pod.get("automountServiceAccountToken") is False, name
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert not context.get("privileged"), name
            assert context["capabilities"]["drop"] == ["ALL"], name
            added = set(context["capabilities"].get("add", []))
            if container["name"] == "sandbox-worker":
                assert added == {"SYS_ADMIN", "SETUID", "SETGID", "KILL"}
                assert context["seccompProfile"]["type"] == "RuntimeDefault"
            else:
                assert not added, f"{name}/{container['name']}"
                assert context["allowPrivilegeEscalation"] is False, name
                non_root = context.get(
                    "runAsNonRoot", pod.get("securityContext", {}).get("runAsNonRoot")
                )
                assert non_root is True, f"{name}/{container['name']}"


def test_commands_are_the_cli_s_commands() -> None:
    from deploy.cli.main import app

    commands = {
        c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands
    }
    for name, template in _pods(RENDERED["production"]):
        pod = template["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            text = " ".join(container["command"])
            if "agentcards " in text:
                word = text.split("agentcards ", 1)[1].split()[0]
                assert word in commands, f"{name}: `agentcards {word}` does not exist"
