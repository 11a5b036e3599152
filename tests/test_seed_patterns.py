"""Seed patterns gpuc compiles: tainted GPU pools, CDI on older GPU Operators."""

from __future__ import annotations

import json

import yaml

from conftest import NIM_SECRETS, REFERENCE, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc

GKE_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TEAM_TAINT = {"key": "dedicated", "value": "inference", "effect": "NoExecute"}


def release(compiled, component: str):
    return next(r for r in compiled.releases if r.component == component)


def tainted_fleet(fleet, **cluster):
    pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [GKE_TAINT, TEAM_TAINT]},
             {"name": "l4", "nodes": 1, "gpu": {"model": "L4-24GB", "count": 4}}]
    chat = workload_doc("chat", "serving", model=nim_model("8B"), secrets=NIM_SECRETS, gpu={"count": 1, "require": {"architecture": ["Hopper"]}})
    small = workload_doc("small", "serving", model=nim_model("1B"), secrets=NIM_SECRETS, gpu={"count": 1, "require": {"productName": "NVIDIA L4"}})
    return fleet(clusters=[cluster_doc(pools=pools, **cluster)], workloads={"w.yaml": [chat, small]})


def test_tainted_pools_get_tolerations_where_pods_must_land(fleet, tmp_path):
    root = tainted_fleet(fleet)
    compiled = compile_single(root)
    want = [{"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"},
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert release(compiled, "dra-driver").values["kubeletPlugin"]["tolerations"] == want
    services = {s["metadata"]["name"]: s for s in objects_of(compiled, "NIMService")}
    assert services["chat"]["spec"]["tolerations"] == want  # may land on the tainted H100 pool
    assert "tolerations" not in services["small"]["spec"]  # serves from the untainted L4 pool only
    # the operands tolerate nvidia.com/gpu by default; the team taint is added, the default kept
    operator = release(compiled, "gpu-operator").values
    assert operator["daemonsets"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                                     {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"}]
    result = gpuc("render", root, "-o", tmp_path / "out", "--crds", REFERENCE, "--require-crds")
    assert result.code == 0, result.err  # the NIMService's tolerations pass the NIM Operator's CRD


def test_a_gke_taint_alone_needs_no_operand_change(fleet):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [GKE_TAINT]}]
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=pools)]))
    assert "daemonsets" not in release(compiled, "gpu-operator").values
    assert release(compiled, "dra-driver").values["kubeletPlugin"]["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_a_bad_taint_is_named(fleet):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [{"key": "gpu", "effect": "Sometimes"}]}]
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=pools)]))
    assert result.code == 2 and "spec.nodePools[0].taints[0].effect" in result.err


def test_cdi_default_before_gpu_operator_v25_10(fleet):
    old = compile_single(fleet(clusters=[cluster_doc(gpuOperator={"version": "v25.3.4"})]))
    assert release(old, "gpu-operator").values["cdi"] == {"enabled": True, "default": True}
    new = compile_single(fleet(clusters=[cluster_doc(gpuOperator={"version": "v25.10.1"})]))
    assert release(new, "gpu-operator").values["cdi"] == {"enabled": True}
    assert yaml.safe_dump(release(new, "gpu-operator").values)


def test_null_chart_values_drop_a_default_as_in_helm(fleet, tmp_path):
    root = fleet(clusters=[cluster_doc(draDriver={"values": {"controller": {"affinity": None}, "kubeletPlugin": None}})])
    assert gpuc("render", root, "-o", tmp_path / "out").code == 0
    values = yaml.safe_load((tmp_path / "out" / "c1" / "values" / "nvidia-dra-driver-gpu.yaml").read_text())
    assert values["controller"] == {"affinity": None} and values["kubeletPlugin"] is None
    wrong = fleet(clusters=[cluster_doc(draDriver={"values": {"controler": None}})])
    assert "'controler' is not a value of chart" in gpuc("validate", wrong).err  # null does not excuse a typo


GB200_PLUGIN = {"name": "gb200", "nodes": 4, "gpu": {"model": "GB200-186GB", "count": 4}, "allocation": "devicePlugin",
                "taints": [GKE_TAINT]}


def test_compute_domains_while_gpus_stay_on_the_device_plugin(fleet, tmp_path):
    """The second seed's install: the DRA driver with GPUs off and ComputeDomains on, GPUs as nvidia.com/gpu."""
    trainer = workload_doc("trainer", "research", gpu={"count": 4, "multiNode": {"nodes": 2}})
    big = workload_doc("big", "serving", model=nim_model("405B", precision="fp8"), secrets=NIM_SECRETS,
                       gpu={"count": "auto", "multiNode": {"nodes": 2}}, cache={"accessMode": "ReadWriteMany"})
    root = fleet(clusters=[cluster_doc(driver="25.12.0", pools=[GB200_PLUGIN])], workloads={"w.yaml": [trainer, big]})
    compiled = compile_single(root)
    values = release(compiled, "dra-driver").values
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert "gpuResourcesEnabledOverride" not in values
    # the kubelet plugin serves the channels on the tainted GB200 nodes, and the NIM lands there too
    assert values["kubeletPlugin"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert sorted(d["metadata"]["name"].split("-")[0] for d in objects_of(compiled, "ComputeDomain")) == ["big", "trainer"]
    assert objects_of(compiled, "ResourceClaimTemplate") == []  # no GPU claim: the device plugin hands out the GPUs
    (service,) = objects_of(compiled, "NIMService")
    assert "draResources" not in service["spec"] and service["spec"]["resources"] == {"limits": {"nvidia.com/gpu": 2}}  # per node
    assert service["spec"]["multiNode"]["computeDomain"]["name"].startswith("big-")
    assert service["spec"]["tolerations"] == values["kubeletPlugin"]["tolerations"]
    result = gpuc("render", root, "-o", tmp_path / "out", "--crds", REFERENCE, "--require-crds")
    assert result.code == 0, result.err
    explain = gpuc("explain", root, "trainer").out
    assert "nvidia.com/gpu" in explain


def test_device_plugin_channels_beside_dra_gpus_are_refused_with_the_reason(fleet):
    pools = [GB200_PLUGIN, {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}]
    trainer = workload_doc("trainer", "research", gpu={"count": 4, "multiNode": {"nodes": 2}, "require": {"productName": "NVIDIA GB200"}})
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=pools)], workloads={"w.yaml": [trainer]}))
    assert result.code == 1  # a plan finding: the cluster cannot serve it as it is
    assert "needs the DRA driver with GPUs off, but pools h100 allocate GPUs through DRA" in result.err


def test_the_seed_fleet_renders(fleet, tmp_path):
    """Both patterns in one fleet: GB200 on the device plugin running a multi-node job, tainted H100s serving a NIM."""
    gb = cluster_doc("gb", pools=[GB200_PLUGIN])
    gke = cluster_doc("gke", pools=[{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [GKE_TAINT]}])
    trainer = workload_doc("trainer", "research", clusters=["gb"], gpu={"count": 4, "multiNode": {"nodes": 2}})
    chat = workload_doc("chat", "serving", clusters=["gke"], model=nim_model("8B"), secrets=NIM_SECRETS, gpu={"count": 1})
    root = fleet(clusters=[gb, gke], workloads={"w.yaml": [trainer, chat]})
    result = gpuc("render", root, "-o", tmp_path / "out", "--crds", REFERENCE, "--require-crds")
    assert result.code == 0, result.err
    gb_values = yaml.safe_load((tmp_path / "out" / "gb" / "values" / "nvidia-dra-driver-gpu.yaml").read_text())
    assert gb_values["resources"]["computeDomains"]["enabled"] is True and gb_values["kubeletPlugin"]["tolerations"]
    assert list((tmp_path / "out" / "gb").glob("*computedomain-research-trainer-*.yaml"))
    service = yaml.safe_load(next((tmp_path / "out" / "gke").glob("*nimservice-serving-chat.yaml")).read_text())
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in service["spec"]["tolerations"]


def test_a_standalone_device_plugin_gets_the_affinity_that_keeps_it_off_dra_nodes(fleet, tmp_path):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": "l4", "nodes": 1, "gpu": {"model": "L4-24GB", "count": 4}, "allocation": "devicePlugin"}]
    root = fleet(clusters=[cluster_doc(pools=pools, gpuOperator={"mode": "none"})])
    result = gpuc("render", root, "-o", tmp_path / "out")
    assert result.code == 0 and "values/nvidia-device-plugin.yaml" in result.err  # the mode-none warning points at it
    path = tmp_path / "out" / "c1" / "values" / "nvidia-device-plugin.yaml"
    terms = yaml.safe_load(path.read_text())["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["key"] for t in terms] == [
        "feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/cpu-model.vendor_id", "nvidia.com/gpu.present"]
    assert all(t["matchExpressions"][1] == {"key": "nvidia.com/gpu.dra", "operator": "NotIn", "values": ["true"]} for t in terms)
    labels = yaml.safe_load((tmp_path / "out" / "c1" / "node-labels.yaml").read_text())
    assert labels["h100"]["nvidia.com/gpu.dra"] == "true" and "nvidia.com/gpu.dra" not in labels["l4"]
    helm = compile_single(fleet(clusters=[cluster_doc(pools=pools)]))
    assert helm.advice == {}  # the GPU Operator's own device plugin honours its deploy label


MIG_POOL = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
TWO_SLICES = {"mig": {"slices": [{"profile": "3g.40gb"}, {"profile": "1g.10gb"}]}}


def test_a_nim_names_the_claim_requests_it_uses(fleet, monkeypatch):
    def nim(**model):
        return workload_doc("guard", "serving", model=nim_model("1B", **model), secrets=NIM_SECRETS, gpu=TWO_SLICES)

    whole = fleet(clusters=[cluster_doc(pools=[MIG_POOL])], workloads={"w.yaml": [nim()]})
    monkeypatch.chdir(whole)
    result = gpuc("validate", ".")
    assert result.code == 0
    assert ("workloads/w.yaml:13: warning: spec.gpu: NIMService serving/guard spec.draResources[0]: the NIM's container gets every "
            "device of the claim's 2 requests (mig-3g-40gb, mig-1g-10gb)") in result.err
    assert "hint: name the requests the model uses in model.requests" in result.err
    one = fleet(clusters=[cluster_doc(pools=[MIG_POOL])], workloads={"w.yaml": [nim(requests=["mig-3g-40gb"])]})
    compiled = compile_single(one)
    (service,) = objects_of(compiled, "NIMService")
    assert service["spec"]["draResources"][0]["requests"] == ["mig-3g-40gb"]
    idle = gpuc("validate", one)
    assert idle.code == 0 and "the claim's request(s) mig-1g-10gb are allocated but no container of the NIM gets their devices" in idle.err
    wrong = gpuc("validate", fleet(clusters=[cluster_doc(pools=[MIG_POOL])], workloads={"w.yaml": [nim(requests=["mig-3g40gb"])]}))
    assert wrong.code == 1 and "spec.model.requests[0]" in wrong.err and "has no request 'mig-3g40gb'" in wrong.err


NIC_POOL = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8},
            "nics": {"driver": "rdma.nvidia.com", "deviceClass": "rdma.nvidia.com", "count": 4}}


def test_a_gpu_and_an_rdma_nic_on_one_pcie_root(fleet, tmp_path):
    """The WG deck's pattern: one GPU and a NIC of another DRA driver on the same PCIe root."""
    job = workload_doc("allreduce", "research", replicas=4, gpu={"count": 1, "nics": 1})
    root = fleet(clusters=[cluster_doc(pools=[NIC_POOL])], workloads={"w.yaml": [job]})
    compiled = compile_single(root)
    (template,) = objects_of(compiled, "ResourceClaimTemplate")
    devices = template["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["gpu", "nic"]
    assert devices["requests"][1]["exactly"] == {"deviceClassName": "rdma.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    assert devices["constraints"] == [{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    plan = json.loads(gpuc("plan", root, "--output", "json").out)["clusters"][0]
    assert plan["feasible"]
    pods = plan["pods"]
    assert len(pods) == 4 and all(len(p["claims"][0]["devices"]) == 2 for p in pods)
    # 4 NICs per node, one per two GPUs' root: eight pods would not fit two nodes, four do
    assert gpuc("render", root, "-o", tmp_path / "out").code == 0
    many = fleet(clusters=[cluster_doc(pools=[NIC_POOL])], workloads={"w.yaml": [workload_doc("allreduce", "research", replicas=9,
                                                                                                  gpu={"count": 1, "nics": 1})]})
    assert gpuc("plan", many).code == 1  # 8 NICs in the cluster: the ninth pod finds no NIC on its GPU's root


def test_nic_alignment_needs_whole_gpus_and_a_pool_with_nics(fleet):
    sized = workload_doc("sized", "research", model=nim_model(), secrets=NIM_SECRETS, gpu={"count": "auto", "nics": 1})
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=[NIC_POOL])], workloads={"w.yaml": [sized]}))
    assert result.code == 1 and "spec.gpu.nics" in result.err and "set gpu.count to a number" in result.err
    bare = workload_doc("bare", "research", gpu={"count": 1, "nics": 1})
    result = gpuc("validate", fleet(workloads={"w.yaml": [bare]}))
    assert "declares no NICs (nodePools[].nics)" in result.err


def test_a_gpu_outside_the_catalog_renders_from_the_slices_the_cluster_publishes(fleet, tmp_path):
    import kubectl

    product = "NVIDIA GH200 480GB"
    pools = [{"name": "gh", "nodes": 2, "gpu": {"model": product, "count": 1}}]
    root = fleet(clusters=[cluster_doc(pools=pools)], workloads={"w.yaml": [workload_doc("llm", replicas=2, gpu={"count": 1})]})
    unknown = gpuc("validate", root)
    assert unknown.code == 2 and f"unknown GPU model '{product}'" in unknown.err
    assert "pass the cluster's ResourceSlices with --state (Pulumi: stack config gpuc:state)" in unknown.err

    state = tmp_path / "state.yaml"
    state.write_text(kubectl.yaml_export([kubectl.gh200_slice("gh-0"), kubectl.gh200_slice("gh-1")]))
    result = gpuc("render", root, "-o", tmp_path / "out", "--cluster", "c1", "--state", state)
    assert result.code == 0, result.err
    plan = json.loads(gpuc("plan", root, "--cluster", "c1", "--state", state, "--output", "json").out)["clusters"][0]
    assert sorted(p["node"] for p in plan["pods"]) == ["gh-0", "gh-1"]
    assert list((tmp_path / "out" / "c1").glob("3-resourceclaimtemplate-team-llm-gpu-*.yaml"))
