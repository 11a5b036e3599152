"""The Argo CD health checks gpuc emits, run as Argo CD runs them: Lua 5.1 (Argo CD's gopher-lua dialect) with
the live object as the global `obj`, against statuses shaped as `kubectl get -o yaml` prints them."""

from __future__ import annotations

import json

import pytest
import yaml
from lupa import lua51

from compiler.lower.argocd import HEALTH_KEY, health_checks
from tests.conftest import EXAMPLES, REFERENCE, gpuc

# Argo CD opens only these libraries for health scripts: a check that needs io, os or require fails there.
SANDBOX = ["io", "os", "debug", "package", "require", "dofile", "loadfile", "load", "loadstring", "module"]


def health(group_kind: str, live: dict) -> dict:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    g = runtime.globals()
    for name in SANDBOX:
        g[name] = None

    def to_lua(value):
        if isinstance(value, dict):
            return runtime.table_from({k: to_lua(v) for k, v in value.items()})
        if isinstance(value, list):
            return runtime.table_from([to_lua(v) for v in value])
        return value

    g.obj = to_lua(live)
    script = health_checks()[HEALTH_KEY.format(group_kind)]
    result = runtime.execute(script)
    out = dict(result.items())
    assert out["status"] in ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")
    return out


def live(text: str) -> dict:
    return yaml.safe_load(text)


# ------------------------------------------------------------------------------------- ResourceClaim

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared-gpu-0c8e2f1a
  namespace: team
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 1}
"""

ALLOCATED = CLAIM + """
status:
  allocation:
    allocationTimestamp: "2026-11-24T10:02:11Z"
    devices:
      results:
      - device: gpu-3
        driver: gpu.nvidia.com
        pool: node-a
        request: gpu
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {key: metadata.name, operator: In, values: [node-a]}
  reservedFor:
  - {name: trainer-0, resource: pods, uid: 5d3c1f8e-7d7a-4bd1-9b7e-1c1d0e6a8f21}
  - {name: trainer-1, resource: pods, uid: 0b8f3e0c-2f44-4a46-a0a1-9e1b7d0c3a55}
"""


def test_an_unallocated_claim_is_healthy_so_sync_waves_do_not_wait_for_its_consumers():
    assert health("resource.k8s.io_ResourceClaim", live(CLAIM)) == {
        "status": "Healthy", "message": "not allocated yet: DRA allocates it when a pod that uses it is scheduled"}


def test_an_allocated_claim_says_what_it_holds():
    hs = health("resource.k8s.io_ResourceClaim", live(ALLOCATED))
    assert hs == {"status": "Healthy", "message": "allocated 1 device(s) (gpu-3), reserved for 2 consumer(s)"}


def test_a_device_the_driver_reports_not_ready_degrades_the_claim():
    obj = live(ALLOCATED)
    obj["status"]["devices"] = [{"driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-3", "conditions": [
        {"type": "Ready", "status": "False", "reason": "PrepareFailed", "message": "MIG device not found",
         "lastTransitionTime": "2026-11-24T10:02:15Z"}]}]
    hs = health("resource.k8s.io_ResourceClaim", obj)
    assert hs == {"status": "Degraded", "message": "device gpu-3 is not ready: Ready (PrepareFailed): MIG device not found"}


def test_binding_conditions_pending_then_failed():
    obj = live(ALLOCATED)
    result = obj["status"]["allocation"]["devices"]["results"][0]
    result["bindingConditions"] = ["Attached"]
    result["bindingFailureConditions"] = ["AttachFailed"]
    assert health("resource.k8s.io_ResourceClaim", obj) == {
        "status": "Progressing", "message": "waiting for devices to bind: gpu-3 (Attached)"}
    obj["status"]["devices"] = [{"driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-3", "conditions": [
        {"type": "AttachFailed", "status": "True", "reason": "FabricTimeout", "message": "no fabric response"}]}]
    assert health("resource.k8s.io_ResourceClaim", obj)["status"] == "Degraded"
    obj["status"]["devices"][0]["conditions"] = [{"type": "Attached", "status": "True", "reason": "Done"}]
    assert health("resource.k8s.io_ResourceClaim", obj)["status"] == "Healthy"


# ------------------------------------------------------------------------------------- ComputeDomain

DOMAIN = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: big-26306ade
  namespace: team
spec:
  channel:
    allocationMode: Single
    resourceClaimTemplate: {name: big-26306ade-channel}
  numNodes: 0
status:
  status: NotReady
"""


def test_a_compute_domain_no_node_joined_yet_is_healthy():
    hs = health("resource.nvidia.com_ComputeDomain", live(DOMAIN))
    assert hs["status"] == "Healthy" and "no node has joined yet" in hs["message"]


def test_a_compute_domain_with_a_daemon_not_ready_is_progressing_and_says_where():
    obj = live(DOMAIN)
    obj["status"]["nodes"] = [
        {"name": "gb-0", "ipAddress": "10.0.3.4", "cliqueID": "c0ffee.1", "index": 0, "status": "Ready"},
        {"name": "gb-1", "ipAddress": "10.0.3.5", "cliqueID": "c0ffee.1", "index": 1, "status": "NotReady"}]
    hs = health("resource.nvidia.com_ComputeDomain", obj)
    assert hs["status"] == "Progressing"
    assert hs["message"].startswith("1 of 2 IMEX daemon(s) ready; not ready: gb-1")
    assert "nvidia-imex service is disabled" in hs["message"]
    obj["status"]["nodes"][1]["status"] = "Ready"
    obj["status"]["status"] = "Ready"
    assert health("resource.nvidia.com_ComputeDomain", obj) == {"status": "Healthy", "message": "ready on 2 node(s)"}


def test_num_nodes_of_older_drivers_gates_readiness():
    obj = live(DOMAIN)
    obj["spec"]["numNodes"] = 2
    obj["status"]["nodes"] = [{"name": "gb-0", "ipAddress": "10.0.3.4", "cliqueID": "c0ffee.1", "status": "Ready"}]
    assert health("resource.nvidia.com_ComputeDomain", obj) == {
        "status": "Progressing", "message": "1 of 1 IMEX daemon(s) ready (numNodes 2)"}


# ------------------------------------------------------------------------------------- NIMCache / NIMService

@pytest.mark.parametrize("state, conditions, expected", [
    (None, [], ("Progressing", "waiting for the NIM Operator to start caching")),
    ("PVC-Created", [], ("Progressing", "caching: PVC-Created")),
    ("InProgress", [{"type": "NIM_CACHE_JOB_CREATED", "status": "True", "reason": "JobCreated"}], ("Progressing", "caching: InProgress")),
    ("Ready", [], ("Healthy", "model cached in PVC llama-70b-pvc")),
    ("Failed", [{"type": "NIM_CACHE_JOB_COMPLETED", "status": "False", "reason": "JobFailed",
                 "message": "model download failed: 401 Unauthorized"}],
     ("Degraded", "caching failed: model download failed: 401 Unauthorized")),
    ("Failed", [], ("Degraded", "caching failed: see the logs of the NIMCache's job")),
    ("NotReady", [{"type": "NIM_CACHE_RECONCILE_FAILED", "status": "True", "reason": "ReconcileFailed",
                   "message": "Pod \"llama-70b-pod\" not found"}],
     ("Progressing", "caching: NotReady, the NIM Operator retries: Pod \"llama-70b-pod\" not found")),
])
def test_nim_cache(state, conditions, expected):
    obj = {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMCache", "metadata": {"name": "llama-70b"}, "spec": {}}
    if state is not None:
        obj["status"] = {"state": state, "pvc": "llama-70b-pvc", "conditions": conditions}
    hs = health("apps.nvidia.com_NIMCache", obj)
    assert (hs["status"], hs["message"]) == expected


@pytest.mark.parametrize("status, expected", [
    (None, ("Progressing", "waiting for the NIM Operator")),
    ({"state": "Pending", "conditions": [{"type": "Ready", "status": "False", "reason": "Pending",
                                          "message": "0 of 2 updated replicas are available"}]},
     ("Progressing", "Pending: 0 of 2 updated replicas are available")),
    ({"state": "Ready", "availableReplicas": 2, "conditions": [{"type": "Ready", "status": "True"}]},
     ("Healthy", "2 replica(s) ready")),
    ({"state": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": "Failed",
                                         "message": "NIMCache llama-70b not ready"}]}, ("Degraded", "NIMCache llama-70b not ready")),
])
def test_nim_service(status, expected):
    obj = {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService", "metadata": {"name": "llama-70b"}, "spec": {}}
    if status is not None:
        obj["status"] = status
    hs = health("apps.nvidia.com_NIMService", obj)
    assert (hs["status"], hs["message"]) == expected


# ------------------------------------------------------------------------------------- what is emitted

def _kinds_with_status() -> set[str]:
    """group_Kind of every kind in the reference schemas that has a status Argo CD could judge."""
    out = set()
    for path in (REFERENCE / "nvidia-dra-driver-gpu" / "main-0.5.0-dev" / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if "status" in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].get("properties", {}):
            out.add(f"{crd['spec']['group']}_{crd['spec']['names']['kind']}")
    for path in (REFERENCE / "nim-operator").glob("apps.nvidia.com_*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if "status" in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].get("properties", {}):
            out.add(f"{crd['spec']['group']}_{crd['spec']['names']['kind']}")
    schemas = json.loads((REFERENCE / "kubernetes" / "apis__resource.k8s.io__v1_openapi.json").read_text())["components"]["schemas"]
    for schema in schemas.values():
        kinds = schema.get("x-kubernetes-group-version-kind", [])
        if kinds and "status" in schema.get("properties", {}):
            out.add(f"{kinds[0]['group']}_{kinds[0]['kind']}")
    return out


def test_every_kind_gpuc_emits_that_argo_cd_cannot_judge_has_a_check(tmp_path):
    assert gpuc("render", EXAMPLES, "-o", tmp_path).code == 0
    emitted = set()
    for path in tmp_path.glob("*/*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "apiVersion" in doc and "/" in doc["apiVersion"]:
                emitted.add(f"{doc['apiVersion'].split('/')[0]}_{doc['kind']}")
    needed = emitted & _kinds_with_status()
    assert {"resource.k8s.io_ResourceClaim", "resource.nvidia.com_ComputeDomain", "apps.nvidia.com_NIMCache",
            "apps.nvidia.com_NIMService"} <= needed
    assert {HEALTH_KEY.format(k) for k in needed} <= set(health_checks())


def test_the_argocd_cm_patch_is_written_beside_the_applications_but_not_synced_by_them(tmp_path):
    assert gpuc("render", EXAMPLES, "-o", tmp_path).code == 0
    patches = sorted(tmp_path.glob("*/argocd/argocd-cm-health.yaml"))
    assert patches and len({p.read_text() for p in patches}) == 1  # one Argo CD may serve every cluster
    cm = yaml.safe_load(patches[0].read_text())
    assert cm["metadata"] == {"name": "argocd-cm", "namespace": "argocd",
                              "labels": {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"}}
    assert set(cm["data"]) == set(health_checks())
    assert "kubectl apply --server-side --field-manager=gpuc" in patches[0].read_text()
    kustomization = yaml.safe_load((patches[0].parent / "kustomization.yaml").read_text())
    assert "argocd-cm-health.yaml" not in kustomization["resources"]
