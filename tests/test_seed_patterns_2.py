"""Seed patterns, second round: admin access, passthrough, NIC selectors, managed-Kubernetes labels and quotas."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import NIM_SECRETS, REFERENCE, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc

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


# ------------------------------------------------------------------------- managed Kubernetes: labels, quotas

GKE_LABEL = {"gke-no-default-nvidia-gpu-device-plugin": "true"}


def gke_pools(labels: dict | None = None) -> list[dict]:
    pool = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "nodeNames": ["gke-a", "gke-b"]}
    return [{**pool, "labels": labels} if labels is not None else pool]


def test_pool_labels_go_out_with_gpucs_own(fleet, tmp_path):
    root = fleet(clusters=[cluster_doc(provider="gke", gpuOperator={"version": "v26.7.0"}, pools=gke_pools({**GKE_LABEL, "team": "ml"}))])
    result = gpuc("render", root, "-o", tmp_path / "out")
    assert result.code == 0 and result.err == "", result.err
    labels = yaml.safe_load((tmp_path / "out" / "c1" / "node-labels.yaml").read_text())["h100"]
    assert labels == {"gke-no-default-nvidia-gpu-device-plugin": "true", "nvidia.com/gpu.dra": "true", "team": "ml"}
    patch = yaml.safe_load((tmp_path / "out" / "c1" / "1-node-gke-a.yaml").read_text())
    assert patch["metadata"]["labels"] == labels


def test_a_gke_dra_pool_without_its_label_is_a_warning_with_the_fix(fleet):
    result = gpuc("validate", fleet(clusters=[cluster_doc(provider="gke", pools=gke_pools())]))
    assert result.code == 0
    assert "DRA pool 'h100' on Google Kubernetes Engine lacks the node label(s) 'gke-no-default-nvidia-gpu-device-plugin'" in result.err
    assert 'add `labels: {gke-no-default-nvidia-gpu-device-plugin: "true"}`' in result.err
    assert "clusters/c1.yaml:" in result.err and "spec.nodePools[0]" in result.err
    assert gpuc("validate", fleet(clusters=[cluster_doc(provider="eks", gpuOperator={"version": "v26.7.0"}, pools=gke_pools())])).err == ""  # EKS: no node label


def test_the_provider_is_recognised_from_the_state_nodes(fleet, tmp_path):
    import kubectl

    root = fleet(clusters=[cluster_doc(pools=gke_pools())])
    state = tmp_path / "state.yaml"
    state.write_text(kubectl.yaml_export([kubectl.node(n, {"cloud.google.com/gke-nodepool": "gpu"}) for n in ("gke-a", "gke-b")]))
    result = gpuc("validate", root, "--cluster", "c1", "--state", state)
    assert result.code == 0 and "(recognised from the nodes' labels in --state)" in result.err
    compiled = compile_single(root)  # without the state: no provider, no quota
    assert not objects_of(compiled, "ResourceQuota")


def test_gke_gets_the_quota_that_admits_the_critical_pods(fleet, tmp_path):
    root = fleet(clusters=[cluster_doc(provider="gke", pools=gke_pools(GKE_LABEL))])
    compiled = compile_single(root)
    quotas = {q["metadata"]["namespace"]: q for q in objects_of(compiled, "ResourceQuota")}
    assert sorted(quotas) == ["gpu-operator", "nvidia-dra-driver-gpu"]  # both charts run system-node-critical pods
    assert quotas["nvidia-dra-driver-gpu"]["spec"] == {
        "hard": {"pods": "1000"},
        "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                "values": ["system-node-critical", "system-cluster-critical"]}]}}
    chart = yaml.safe_load((REFERENCE / "nvidia-dra-driver-gpu" / "v25.12.0" / "values.yaml").read_text())
    assert {chart["controller"]["priorityClassName"], chart["kubeletPlugin"]["priorityClassName"]} <= set(
        quotas["nvidia-dra-driver-gpu"]["spec"]["scopeSelector"]["matchExpressions"][0]["values"])
    assert gpuc("render", root, "-o", tmp_path / "out").code == 0  # and the ResourceQuota passes the 1.34 schema
    # Synced by the chart's own Application, not the rendered tree's (a later wave, which would wait for charts
    # whose pods wait for the quota): tests/real/test_real_argocd.py syncs a GKE-shaped cluster for real.
    out = tmp_path / "out" / "c1"
    top = yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]
    assert not [f for f in top if "resourcequota" in f]
    for release in ("gpu-operator", "nvidia-dra-driver-gpu"):
        folder = out / "releases" / release
        assert yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"] == [
            f"0-resourcequota-{release}-gpuc-critical-pods.yaml"]
        app = yaml.safe_load((out / "argocd" / f"c1-{release}.yaml").read_text())
        assert app["spec"]["sources"][2] == {"repoURL": "https://git.example.com/fleet.git", "targetRevision": "main",
                                             "path": f"rendered/c1/releases/{release}"}
    for other in ("eks", None):
        assert not objects_of(compile_single(fleet(clusters=[cluster_doc(provider=other, pools=gke_pools())])), "ResourceQuota")


def test_pool_label_mistakes_are_named(fleet):
    taken = gpuc("validate", fleet(clusters=[cluster_doc(pools=gke_pools({"nvidia.com/gpu.dra": "false"}))]))
    assert taken.code == 2 and "spec.nodePools[0].labels.nvidia.com/gpu.dra" in taken.err and "gpuc sets itself" in taken.err
    bad = gpuc("validate", fleet(clusters=[cluster_doc(pools=gke_pools({"team": "has space"}))]))
    assert bad.code == 2 and "spec.nodePools[0].labels" in bad.err
    unknown = gpuc("validate", fleet(clusters=[cluster_doc(provider="gek")]))
    assert unknown.code == 2 and "spec.provider" in unknown.err and "gke" in unknown.err


# ---------------------------------------------------------------------------------- passthrough (vfio)

# The first driver release that publishes vfio devices (25.12.x has the gate but publishes none).
VFIO_DRIVER = "0.4.1"

VM_POOLS = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
            {"name": "vm", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 4}, "passthrough": True}]
H100_ONLY = {"productName": "NVIDIA H100 80GB HBM3"}
VM = workload_doc("vm1", "vms", replicas=2, gpu={"count": 2, "passthrough": True})


def test_a_vm_gets_the_vfio_twins_of_the_passthrough_pools_gpus(fleet, tmp_path):
    root = fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=VM_POOLS)],
                 workloads={"w.yaml": [VM, workload_doc("train", "team", gpu={"count": 8, "require": H100_ONLY})]})
    compiled = compile_single(root)
    spec = only(compiled, "ResourceClaimTemplate", "vms")["spec"]["spec"]["devices"]
    assert spec["requests"] == [{"name": "gpu", "exactly": {
        "deviceClassName": "vfio.gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].deviceID in ['0x20b2', '0x20b5']"}}]}}]
    # KubeVirt's virt-launcher needs /dev/vfio/vfio (only with enableAPIDevice: the driver's default leaves it out) and
    # the device metadata file (gate DeviceMetadata): facts capabilities.Passthrough, with their sources
    assert spec["config"] == [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig",
        "iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": True}}}}]
    assert compiled.driver_values["featureGates"] == {"DeviceMetadata": True, "PassthroughSupport": True}
    plan = json.loads(gpuc("plan", root, "--output", "json").out)["clusters"][0]
    vms = [p for p in plan["pods"] if p["workload"] == "vms/vm1"]
    assert {p["node"] for p in vms} == {"vm-0"}
    assert sorted(d["device"] for p in vms for d in p["claims"][0]["devices"]) == [f"gpu-vfio-{i}" for i in range(4)]
    # a GPU and its vfio twin are one GPU: the pools count their GPUs once, and the VM's four are all of 'vm'
    assert {p["pool"]: (p["gpus"], p["after"]["gpusUsed"]) for p in plan["pools"]} == {"h100": (16, 8), "vm": (4, 4)}
    inventory = yaml.safe_load(gpuc("inventory", root, "--cluster", "c1").out)
    vfio = [d for s in inventory["items"] for d in s["spec"].get("devices", []) if d["name"].startswith("gpu-vfio")]
    assert len(vfio) == 16 + 4  # every GPU without MIG gets a twin once the gate is on, the regular pool's too
    assert vfio[0]["attributes"]["type"] == {"string": "vfio"} and "addressableMemory" in vfio[0]["capacity"]
    assert gpuc("render", root, "-o", tmp_path / "out").code == 0


def test_ordinary_workloads_stay_off_passthrough_gpus(fleet):
    loose = workload_doc("train", "team", gpu={"count": 1})  # no require: the A100s' regular twins match too
    result = gpuc("validate", fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=VM_POOLS)], workloads={"w.yaml": [loose]}))
    assert result.code == 1 and "could also be allocated on passthrough pool(s) 'vm'" in result.err and "narrow gpu.require" in result.err
    same = [VM_POOLS[0], {**VM_POOLS[1], "gpu": {"model": "H100-80GB", "count": 8}}]
    result = gpuc("validate", fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=same)], workloads={"w.yaml": [VM]}))
    assert result.code == 2 and "spec.nodePools[1].passthrough" in result.err and "the same GPUs (H100-80GB)" in result.err


def test_passthrough_refusals_name_the_field(fleet):
    for driver in ("25.8.1", "25.12.0"):  # the gate came in 25.12, vfio devices in 0.4.0
        old = gpuc("validate", fleet(clusters=[cluster_doc(driver=driver, pools=VM_POOLS)], workloads={"w.yaml": [VM]}))
        assert old.code == 2, old.err
        assert ("spec.draDriver.version: this cluster uses Passthrough, which needs driver 0.4 or newer (the 25.12 line's "
                "kubelet plugin publishes no vfio device)") in old.err
    mig = [VM_POOLS[0], {**VM_POOLS[1], "mig": {"layout": "all-balanced"}}]
    assert "has MIG; the driver hands only GPUs without MIG" in gpuc("validate", fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=mig)])).err
    dynamic = [VM_POOLS[1], {"name": "a30", "nodes": 1, "gpu": {"model": "A30-24GB", "count": 4}, "mig": {"layout": "dynamic"}}]
    assert "refuses feature gates DynamicMIG and PassthroughSupport together" in gpuc(
        "validate", fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=dynamic)])).err
    cases = [({"count": 2, "passthrough": True, "require": H100_ONLY}, "spec.gpu.require"),
             ({"count": "auto", "passthrough": True}, "spec.gpu.count"),
             ({"count": 1, "passthrough": True, "sharing": "Shared"}, "spec.gpu.sharing")]
    for gpu, field in cases:
        result = gpuc("validate", fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=VM_POOLS)], workloads={"w.yaml": [workload_doc("v", "vms", gpu=gpu)]}))
        assert result.code == 2 and field in result.err and "passthrough" in result.err, (field, result.err)
    nowhere = gpuc("validate", fleet(clusters=[cluster_doc()], workloads={"w.yaml": [VM]}))
    assert nowhere.code == 1 and "not a passthrough pool" in nowhere.err


@pytest.mark.parametrize("driver", ["0.4.1", "0.5.1"])
def test_a_vm_claim_gets_what_virt_launcher_needs_on_every_line_with_vfio_devices(fleet, driver):
    """Held-out review (issue 45): with PassthroughSupport alone virt-launcher got no device metadata file, and
    without a VfioDeviceConfig no /dev/vfio/vfio (the plugin's DefaultVfioDeviceConfig has enableAPIDevice false).
    KubeVirt needs both gates and the config (driver guide kubevirt-vfio-gpu-passthrough.md; facts Passthrough)."""
    compiled = compile_single(fleet(clusters=[cluster_doc(driver=driver, pools=VM_POOLS)], workloads={"w.yaml": [VM]}))
    assert compiled.driver_values["featureGates"] == {"DeviceMetadata": True, "PassthroughSupport": True}
    (config,) = only(compiled, "ResourceClaimTemplate", "vms")["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"]["kind"] == "VfioDeviceConfig"
    assert config["opaque"]["parameters"]["iommu"] == {"backendPolicy": "LegacyOnly", "enableAPIDevice": True}


@pytest.mark.parametrize(("values", "field", "text"), [
    ({"webhook": {"enabled": True, "tls": {"mode": "cert-manager"}}}, "spec.draDriver.values.webhook.enabled",
     "the driver's admission webhook refuses every VfioDeviceConfig"),
    ({"featureGates": {"DeviceMetadata": False}}, "spec.draDriver.values.featureGates.DeviceMetadata",
     "DeviceMetadata is set false, but node pools of this cluster need it (vm)"),
])
def test_what_keeps_a_vm_from_its_gpu_is_refused(fleet, values, field, text):
    result = gpuc("validate", fleet(clusters=[cluster_doc(driver=VFIO_DRIVER, pools=VM_POOLS, draDriver={"version": VFIO_DRIVER,
                                                                                                         "values": values})],
                                    workloads={"w.yaml": [VM]}))
    assert result.code == 2 and f"{field}: " in result.err and text in result.err, result.err


DCGM_OFF = {"nvidia.com/gpu.deploy.dcgm-exporter": "false", "nvidia.com/gpu.deploy.dcgm": "false"}
DCGM_DRA_OFF = {"nvidia.com/gpu.deploy.dcgm-exporter-dra": "false", "nvidia.com/gpu.deploy.dcgm-dra": "false"}


@pytest.mark.parametrize(("operator", "off"), [
    ({"mode": "helm", "version": "v25.10.1"}, DCGM_OFF),
    ({"mode": "patch", "version": "v24.6.0"}, DCGM_OFF),
    ({"mode": "gpuCluster", "version": "v26.7.0"}, DCGM_DRA_OFF),  # the GPUCluster's own DCGM operands
])
def test_dcgm_stays_off_passthrough_nodes(fleet, operator, off):
    """Held-out review (issue 45): the GPU Operator's dcgm-exporter (and standalone DCGM) hold every GPU of their node
    open, so the kubelet plugin cannot rebind a VM's GPU to vfio-pci; their DaemonSets select a deploy label the
    operator leaves alone once a node has it (facts passthroughOperandsOff, with sources)."""
    cluster = cluster_doc(driver=VFIO_DRIVER, pools=VM_POOLS, gpuOperator=operator)
    labels = compile_single(fleet(clusters=[cluster], workloads={"w.yaml": [VM]})).node_labels
    assert {k: v for k, v in labels["vm"].items() if "dcgm" in k} == off
    assert not any("dcgm" in k for k in labels["h100"])  # pods' GPUs keep their monitoring


# ------------------------------------------------------------------------------- NICs: selectors, one per GPU

SRIOV = "device.attributes['rdma.nvidia.com'].sriovType == 'vf'"
NIC_POOL = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8},
            "nics": {"driver": "rdma.nvidia.com", "deviceClass": "rdma.nvidia.com", "count": 8, "attributes": {"sriovType": "vf"}}}


def test_each_gpu_gets_its_own_nic_on_its_own_root(fleet, tmp_path):
    job = workload_doc("allreduce", "research", replicas=2, gpu={"count": 4, "nics": {"count": 1, "cel": [SRIOV]}})
    root = fleet(clusters=[cluster_doc(pools=[NIC_POOL])], workloads={"w.yaml": [job]})
    devices = only(compile_single(root), "ResourceClaimTemplate")["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "nic-0", "nic-1", "nic-2", "nic-3"]
    assert devices["requests"][0]["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    assert devices["requests"][4]["exactly"] == {"deviceClassName": "rdma.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                                                 "selectors": [{"cel": {"expression": SRIOV}}]}
    assert devices["constraints"] == [{"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}
                                      for i in range(4)]
    plan = json.loads(gpuc("plan", root, "--output", "json").out)["clusters"][0]
    assert plan["feasible"]
    for pod in plan["pods"]:  # every GPU's NIC is the one on its root (NIC i on GPU i's root: 8 NICs for 8 GPUs)
        got = {d["request"]: d["device"] for d in pod["claims"][0]["devices"]}
        assert all(got[f"nic-{i}"] == got[f"gpu-{i}"].replace("gpu", "nic") for i in range(4)), got
    assert gpuc("render", root, "-o", tmp_path / "out").code == 0


def test_a_nic_selector_the_nics_do_not_satisfy_leaves_the_pod_unplaced(fleet):
    pool = {**NIC_POOL, "nics": {**NIC_POOL["nics"], "attributes": {"sriovType": "pf"}}}
    job = workload_doc("allreduce", "research", gpu={"count": 1, "nics": {"cel": [SRIOV]}})
    result = gpuc("plan", fleet(clusters=[cluster_doc(pools=[pool])], workloads={"w.yaml": [job]}))
    assert result.code == 1 and "nic" in result.out


def test_nics_on_half_the_roots_fit_half_the_gpus(fleet):
    pool = {**NIC_POOL, "nics": {"driver": "rdma.nvidia.com", "deviceClass": "rdma.nvidia.com", "count": 4}}  # on GPUs 0, 2, 4, 6
    two = workload_doc("pair", "research", gpu={"count": 2, "nics": 1}, replicas=4)  # 4 pods x 2 GPUs, each GPU needing a NIC
    assert gpuc("plan", fleet(clusters=[cluster_doc(pools=[pool])], workloads={"w.yaml": [two]})).code == 0
    more = workload_doc("pair", "research", gpu={"count": 2, "nics": 1}, replicas=5)  # 8 NIC roots in the cluster hold 4 pairs
    assert gpuc("plan", fleet(clusters=[cluster_doc(pools=[pool])], workloads={"w.yaml": [more]})).code == 1


# ------------------------------------------------------------------------------ NIM with DRA on Kubernetes 1.33

CHAT = workload_doc("chat", "serving", model=nim_model(), secrets=NIM_SECRETS, gpu={"count": 1})


def test_a_nim_on_kubernetes_1_33_compiles_with_nim_operator_3_0(fleet, tmp_path):
    root = fleet(clusters=[cluster_doc(kubernetes="1.33", driver="25.8.1", nimOperator={"version": "3.0.2"})], workloads={"w.yaml": [CHAT]})
    result = gpuc("render", root, "-o", tmp_path / "out", "--crds", REFERENCE, "--require-crds")
    assert result.code == 0, result.err
    compiled = compile_single(root)
    template = only(compiled, "ResourceClaimTemplate")
    assert template["apiVersion"] == "resource.k8s.io/v1beta2"  # what NIM Operator 3.0 reads
    service = only(compiled, "NIMService")
    assert service["spec"]["draResources"] == [{"resourceClaimTemplateName": template["metadata"]["name"]}]


def test_nim_operator_lines_are_refused_on_the_kubernetes_they_do_not_read(fleet):
    cases = [("1.33", "25.8.1", "3.1.2", "spec.nimOperator.version", "use NIM Operator 3.0.x (before 3.1.0)"),
             ("1.34", "25.12.0", "3.0.2", "spec.nimOperator.version", "use NIM Operator 3.1.x or newer"),
             ("1.34", "25.12.0", "2.0.0", "spec.nimOperator.version", "has no draResources (they arrive in 3.0.0)"),
             ("1.32", "25.8.1", "3.0.2", "spec.model", "NIM's DRA support starts with Kubernetes 1.33")]
    for kubernetes, driver, nim, field, says in cases:
        root = fleet(clusters=[cluster_doc(kubernetes=kubernetes, driver=driver, nimOperator={"version": nim})], workloads={"w.yaml": [CHAT]})
        result = gpuc("validate", root)
        assert result.code == 2 and field in result.err and says in result.err, (kubernetes, nim, result.err)


# -------------------------------------------------------------------------- several GPU models on one node

MIXED = ["mix-a", "mix-b"]
MIXED_POOLS = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 4}, "nodeNames": MIXED},
               {"name": "l4", "nodes": 2, "gpu": {"model": "L4-24GB", "count": 2}, "nodeNames": MIXED, "labels": {"team": "ml"}}]


def test_a_node_with_two_gpu_models_is_one_driver_pool_planned_per_model(fleet, tmp_path):
    train = workload_doc("train", "team", replicas=2, gpu={"count": 4, "require": {"productName": "NVIDIA H100 80GB HBM3"}})
    small = workload_doc("small", "team", replicas=3, gpu={"count": 1, "require": {"productName": "NVIDIA L4"}})
    root = fleet(clusters=[cluster_doc(pools=MIXED_POOLS)], workloads={"w.yaml": [train, small]})
    inventory = yaml.safe_load(gpuc("inventory", root, "--cluster", "c1").out)["items"]
    node_a = [s for s in inventory if s["spec"]["nodeName"] == "mix-a" and s["spec"]["driver"] == "gpu.nvidia.com"]
    assert len(node_a) == 1 and node_a[0]["spec"]["pool"] == {"name": "mix-a", "generation": 1, "resourceSliceCount": 1}
    devices = node_a[0]["spec"]["devices"]
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(6)]  # the L4s numbered after the H100s
    assert [d["attributes"]["productName"]["string"] for d in devices] == ["NVIDIA H100 80GB HBM3"] * 4 + ["NVIDIA L4"] * 2
    assert len({d["attributes"]["resource.kubernetes.io/pciBusID"]["string"] for d in devices}) == 6
    plan = json.loads(gpuc("plan", root, "--output", "json").out)["clusters"][0]
    assert plan["feasible"] and plan["inventory"]["nodes"] == 2
    assert {p["pool"]: (p["nodes"], p["gpus"], p["after"]["gpusUsed"]) for p in plan["pools"]} == {"h100": (2, 8, 8), "l4": (2, 4, 3)}
    assert gpuc("render", root, "-o", tmp_path / "out").code == 0
    patch = yaml.safe_load((tmp_path / "out" / "c1" / "1-node-mix-a.yaml").read_text())  # one patch, both pools' labels
    assert patch["metadata"]["labels"] == {"nvidia.com/gpu.dra": "true", "team": "ml"}


def test_pools_on_the_same_nodes_must_agree_on_the_node(fleet):
    def refused(pools, *says):
        result = gpuc("validate", fleet(clusters=[cluster_doc(pools=pools)]))
        assert result.code == 2 and all(s in result.err for s in says), result.err

    h100, l4 = MIXED_POOLS
    refused([h100, {**l4, "nodeNames": ["mix-a", "mix-c"]}], "node 'mix-a' is also listed in pool 'h100'", "list the same nodeNames")
    refused([h100, {**l4, "allocation": "devicePlugin"}], "spec.nodePools[1].allocation", "a node has one")
    refused([h100, {**l4, "gpu": {"model": "H100-80GB", "count": 2}}], "same GPU model", "one pool with the sum")
    refused([h100, {**l4, "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}], "different taints")
    refused([{**h100, "mig": {"layout": "all-balanced"}}, l4], "spec.nodePools[0].mig", "several GPU models")
    refused([{**h100, "gpu": {"model": "H100-80GB", "count": 8}}, {**l4, "gpu": {"model": "L4-24GB", "count": 9}}], "17 GPUs per node")
