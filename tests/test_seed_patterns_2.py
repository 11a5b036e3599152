"""Seed patterns, second round: admin access, passthrough, NIC selectors, managed-Kubernetes labels and quotas."""

from __future__ import annotations

import json

from conftest import NIM_SECRETS, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc

MONITOR = workload_doc("dcgm", "gpu-monitoring", gpu={"adminAccess": True})
TRAIN = workload_doc("train", "team", gpu={"count": 8})


def only(compiled, kind: str, namespace: str | None = None):
    found = [o for o in objects_of(compiled, kind) if namespace is None or o["metadata"].get("namespace", o["metadata"]["name"]) == namespace]
    assert len(found) == 1, found
    return found[0]


# ------------------------------------------------------------------------------------------ admin access

def test_admin_access_sees_every_gpu_of_a_node_in_a_labelled_namespace(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc()], workloads={"w.yaml": [MONITOR, TRAIN]}))
    request = only(compiled, "ResourceClaimTemplate", "gpu-monitoring")["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "adminAccess": True}
    assert only(compiled, "Namespace", "gpu-monitoring")["metadata"]["labels"]["resource.kubernetes.io/admin-access"] == "true"
    assert "resource.kubernetes.io/admin-access" not in only(compiled, "Namespace", "team")["metadata"]["labels"]
    counted = workload_doc("dcgm", "gpu-monitoring", gpu={"adminAccess": True, "count": 2})
    request = only(compile_single(fleet(clusters=[cluster_doc()], workloads={"w.yaml": [counted]})),
                   "ResourceClaimTemplate")["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2, "adminAccess": True}


def test_the_admin_access_label_and_gate_follow_the_kubernetes_minor(fleet):
    old = fleet(clusters=[cluster_doc(kubernetes="1.33", driver="25.8.1")], workloads={"w.yaml": [MONITOR]})
    result = gpuc("validate", old)
    assert result.code == 0 and "DRAAdminAccess" in result.err and "alpha and off by default on Kubernetes 1.33" in result.err
    compiled = compile_single(old)
    assert only(compiled, "Namespace", "gpu-monitoring")["metadata"]["labels"]["resource.k8s.io/admin-access"] == "true"
    ga = compile_single(fleet(clusters=[cluster_doc(kubernetes="1.36")], workloads={"w.yaml": [MONITOR]}))
    assert "resource.kubernetes.io/admin-access" in only(ga, "Namespace", "gpu-monitoring")["metadata"]["labels"]
    assert "DRAAdminAccess" not in gpuc("validate", fleet(clusters=[cluster_doc(kubernetes="1.36")], workloads={"w.yaml": [MONITOR]})).err


def test_the_plan_does_not_count_admin_access_devices_as_used(fleet):
    root = fleet(clusters=[cluster_doc()], workloads={"w.yaml": [MONITOR, {**TRAIN, "spec": {**TRAIN["spec"], "replicas": 2}}]})
    result = gpuc("plan", root, "--output", "json")
    assert result.code == 0, result.err
    cluster = json.loads(result.out)["clusters"][0]
    assert cluster["pools"][0]["after"] == {"gpusUsed": 16}  # the trainers' 16; the monitor's 8 are not counted
    monitor = next(p for p in cluster["pods"] if p["workload"] == "gpu-monitoring/dcgm")
    devices = monitor["claims"][0]["devices"]
    assert len(devices) == 8 and all(d["adminAccess"] for d in devices)  # the GPUs the trainers hold too


def test_admin_access_refusals_name_the_field(fleet):
    cases = [
        (workload_doc("m", "gpu-monitoring", model=nim_model(), secrets=NIM_SECRETS, gpu={"adminAccess": True}), "spec.model"),
        (workload_doc("m", "default", gpu={"adminAccess": True}), "metadata.namespace"),
        (workload_doc("m", "nvidia-dra-driver-gpu", gpu={"adminAccess": True}), "metadata.namespace"),
        (workload_doc("m", "gpu-monitoring", gpu={"adminAccess": True, "sharing": "TimeSlicing", "shareGroup": "g"}), "spec.gpu.sharing"),
        (workload_doc("m", "gpu-monitoring", gpu={"adminAccess": True, "alternatives": [{"count": 1}]}), "spec.gpu.alternatives"),
        (workload_doc("m", "gpu-monitoring", gpu={"adminAccess": True, "mig": {"slices": [{"profile": "1g.10gb"}]}}), "spec.gpu.mig"),
    ]
    for doc, field in cases:
        result = gpuc("validate", fleet(clusters=[cluster_doc()], workloads={"w.yaml": [doc]}))
        assert result.code == 2 and "w.yaml:" in result.err and field in result.err and "adminAccess" in result.err, (field, result.err)


def test_a_namespace_shared_with_ordinary_workloads_is_a_warning(fleet):
    mixed = workload_doc("train", "gpu-monitoring", gpu={"count": 1})
    result = gpuc("validate", fleet(clusters=[cluster_doc()], workloads={"w.yaml": [MONITOR, mixed]}))
    assert result.code == 0 and "every claim created there may use adminAccess" in result.err and "'train'" in result.err
