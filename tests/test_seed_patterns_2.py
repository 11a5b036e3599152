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


# ------------------------------------------------------------------------------------- Pulumi with --state

def test_a_stack_takes_the_cluster_state_from_its_config(fleet, tmp_path, monkeypatch):
    """A GPU outside the catalog needs the slices the cluster publishes: the stack reads them from gpuc:state."""
    import kubectl
    import pulumi
    import pytest

    from pulumi_harness import run_stack

    pools = [{"name": "gh", "nodes": 2, "gpu": {"model": "NVIDIA GH200 480GB", "count": 1}}]
    root = fleet(clusters=[cluster_doc(pools=pools)], workloads={"w.yaml": [workload_doc("llm", replicas=2, gpu={"count": 1})]})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "slices.yaml").write_text(kubectl.yaml_export([kubectl.gh200_slice("gh-0")]))
    (tmp_path / "more.yaml").write_text(kubectl.yaml_export([kubectl.gh200_slice("gh-1")]))
    with pytest.raises(pulumi.RunError) as info:
        run_stack("c1", {"gpuc:fleet": str(root)})
    assert "stack config gpuc:state" in str(info.value)
    run = run_stack("c1", {"gpuc:fleet": str(root), "gpuc:state": json.dumps([str(tmp_path / "slices.yaml"), str(tmp_path / "more.yaml")])})
    assert [r for r in run.kubernetes_objects() if r.type.endswith(":ResourceClaimTemplate")]
    with pytest.raises(pulumi.RunError) as info:  # one node's slices: the second replica has no GPU
        run_stack("c1", {"gpuc:fleet": str(root), "gpuc:state": str(tmp_path / "slices.yaml")})
    assert "cannot be placed" in str(info.value)
    with pytest.raises(pulumi.RunError) as info:
        run_stack("c1", {"gpuc:fleet": str(root), "gpuc:state": str(tmp_path / "missing.yaml")})
    assert "has input errors" in str(info.value) and "missing.yaml" in str(info.value) and "Traceback" not in str(info.value)
    with pytest.raises(pulumi.RunError) as info:
        run_stack("c1", {"gpuc:fleet": str(root), "gpuc:state": "[1, 2]"})
    assert "gpuc:state must be a file name or a list of them" in str(info.value)
