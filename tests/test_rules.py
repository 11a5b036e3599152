"""Cross-object and semantic rules: one test per rule, each checking the message, the line and that
nothing was written."""

from __future__ import annotations

import pytest

from conftest import NIM_SECRETS, PARTITIONED_H100, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc
from test_input_errors import render_rejected

A100_MIG = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "nvlink": {"partitions": [2, 4]}}


def nim(name="w1", **spec):
    return workload_doc(name, model=nim_model(), secrets=NIM_SECRETS, **spec)


# ------------------------------------------------------------------------------------- references

def test_duplicate_workload_names(fleet):
    path = fleet(workloads={"a.yaml": [workload_doc("same")], "b.yaml": [workload_doc("same")]})
    render_rejected(path, "workloads/b.yaml:4: error: metadata.name: duplicate GpuWorkload 'team/same' (also defined at workloads/a.yaml:4)")


def test_duplicate_cluster_names(fleet):
    path = fleet(clusters=[cluster_doc("c1")])
    (path / "clusters" / "copy.yaml").write_text((path / "clusters" / "c1.yaml").read_text())
    render_rejected(path, "duplicate Cluster 'c1'")


def test_duplicate_pool_names(fleet):
    render_rejected(fleet(clusters=[cluster_doc(pools=[H100, dict(H100, nodes=1)])]),
                    "spec.nodePools[1].name: duplicate node pool 'h100'")


def test_unknown_cluster_reference(fleet):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(clusters=["c2"])]}),
                    "workloads/w.yaml:", "spec.clusters[0]: unknown cluster 'c2'", "clusters of this fleet: 'c1'")


def test_unknown_cluster_reference_suggests(fleet):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(clusters=["c11"])]}), "did you mean 'c1'?")


def test_unknown_class_reference(fleet):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(gpu={"class": "fast"})]}),
                    "spec.gpu.class: unknown device class 'fast'", "kind: GpuDeviceClass")


def mig_class(**spec):
    return {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "small-mig.example.com"},
            "spec": {"mig": {"slices": [{"profile": "1g.10gb"}]}, **spec}}


def test_class_cluster_references(fleet):
    render_rejected(fleet(workloads={"c.yaml": [mig_class(clusters=["c11"])]}),
                    "workloads/c.yaml:", "spec.clusters[0]: unknown cluster 'c11'", "did you mean 'c1'?")


def test_workload_on_a_cluster_its_class_is_not_on(fleet):
    clusters = [cluster_doc("c1", pools=[A100_MIG]), cluster_doc("c2", pools=[A100_MIG])]
    w = workload_doc(gpu={"class": "small-mig.example.com", "mig": {"slices": [{"profile": "1g.10gb"}]}})
    render_rejected(fleet(clusters=clusters, workloads={"c.yaml": [mig_class(clusters=["c1"])], "w.yaml": [w]}),
                    "spec.gpu.class: device class 'small-mig.example.com' is not on cluster 'c2'",
                    "add 'c2' to the class's spec.clusters")


def test_builtin_class_reference_is_explained(fleet):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(gpu={"class": "gpu.nvidia.com"})]}),
                    "driver's built-in class, which gpuc uses by default")


def test_class_may_not_take_a_builtin_name(fleet):
    cls = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "mig.nvidia.com"}}
    render_rejected(fleet(workloads={"c.yaml": [cls]}), "'mig.nvidia.com' is a DeviceClass the DRA driver chart creates")


def test_unknown_gpu_model(fleet):
    pool = dict(H100, gpu={"model": "H100-80G", "count": 8})
    render_rejected(fleet(clusters=[cluster_doc(pools=[pool])]), "unknown GPU model 'H100-80G'", "did you mean 'H100-80GB'?")


# ----------------------------------------------------------------------------------- share groups

def test_share_groups_are_per_namespace_and_cluster_in_validation_as_in_lowering(fleet):
    """A group name reused in another namespace is another claim: its members may differ, and lowering
    builds one ResourceClaim per namespace; members in one namespace must still agree."""
    a = workload_doc("a", "ns1", gpu={"sharing": "TimeSlicing", "shareGroup": "g"})
    b = workload_doc("b", "ns2", gpu={"sharing": "MPS", "shareGroup": "g"})
    claims = objects_of(compile_single(fleet(workloads={"w.yaml": [a, b]})), "ResourceClaim")
    assert sorted(c["metadata"]["namespace"] for c in claims) == ["ns1", "ns2"]
    c = workload_doc("c", "ns1", gpu={"sharing": "MPS", "shareGroup": "g"})
    render_rejected(fleet(workloads={"w.yaml": [a, b, c]}), "spec.gpu.sharing: shareGroup 'g' mixes sharing MPS with TimeSlicing")


def test_share_group_members_on_different_clusters_are_different_claims(fleet):
    clusters = [cluster_doc("c1"), cluster_doc("c2")]
    a = workload_doc("a", "ns", clusters=["c1"], gpu={"sharing": "TimeSlicing", "shareGroup": "g"})
    b = workload_doc("b", "ns", clusters=["c2"], gpu={"sharing": "MPS", "shareGroup": "g"})
    assert gpuc("validate", fleet(clusters=clusters, workloads={"w.yaml": [a, b]})).code == 0


def test_share_group_sizing_counts_only_members_of_the_same_claim(fleet):
    """Sizing adds the models of a group's members: only those sharing the claim (same namespace)."""
    big = {"parameters": "70B", "precision": "bf16"}
    a = workload_doc("a", "ns1", model=nim_model("8B"), gpu={"sharing": "TimeSlicing", "shareGroup": "g", "count": "auto"},
                     secrets=NIM_SECRETS)
    b = workload_doc("b", "ns2", model=nim_model(**big), gpu={"sharing": "TimeSlicing", "shareGroup": "g", "count": "auto"},
                     secrets=NIM_SECRETS)
    plans = {p.name: p for p in compile_single(fleet(workloads={"w.yaml": [a, b]})).plan.workloads}
    assert plans["a"].sizing.shared_with == () and plans["b"].sizing.shared_with == ()


def test_share_group_mixing_strategies(fleet):
    a = workload_doc("a", gpu={"sharing": "TimeSlicing", "shareGroup": "g"})
    b = workload_doc("b", gpu={"sharing": "MPS", "shareGroup": "g"})
    render_rejected(fleet(workloads={"w.yaml": [a, b]}), "spec.gpu.sharing: shareGroup 'g' mixes sharing MPS with TimeSlicing")


def test_share_group_mixing_mig_and_full_gpus(fleet):
    a = workload_doc("a", gpu={"sharing": "Shared", "shareGroup": "g"})
    b = workload_doc("b", gpu={"sharing": "Shared", "shareGroup": "g", "mig": {"slices": [{"profile": "1g.10gb"}]}})
    render_rejected(fleet(clusters=[cluster_doc(pools=[H100, A100_MIG])], workloads={"w.yaml": [a, b]}),
                    "shareGroup 'g' mixes MIG slices and full GPUs")


def test_share_group_members_must_agree_on_gpu_settings(fleet):
    a = workload_doc("a", gpu={"sharing": "Shared", "shareGroup": "g", "count": 1})
    b = workload_doc("b", gpu={"sharing": "Shared", "shareGroup": "g", "count": 2})
    render_rejected(fleet(workloads={"w.yaml": [a, b]}), "spec.gpu.count: shareGroup 'g' members disagree on gpu.count")


# --------------------------------------------------------------------------------------------- NIM

def test_nim_on_kubernetes_133_needs_the_3_0_line(fleet):
    path = fleet(clusters=[cluster_doc(kubernetes="1.33")], workloads={"w.yaml": [nim()]})
    render_rejected(path, "spec.nimOperator.version: NIM Operator 3.1.2 reads claims as resource.k8s.io/v1", "use NIM Operator 3.0.x")


def test_nim_needs_nim_operator(fleet):
    doc = cluster_doc()
    del doc["spec"]["nimOperator"]
    render_rejected(fleet(clusters=[doc], workloads={"w.yaml": [nim()]}), "cluster 'c1' has no nimOperator")


def test_nim_operator_before_v1_dra(fleet):
    path = fleet(clusters=[cluster_doc(nimOperator={"version": "3.0.2"})], workloads={"w.yaml": [nim()]})
    render_rejected(path, "clusters/c1.yaml:", "NIM Operator 3.0.2 reads claims as resource.k8s.io/v1beta2")


def test_named_shared_claim_with_replicas_on_nim(fleet):
    path = fleet(workloads={"w.yaml": [nim(replicas=2, gpu={"sharing": "TimeSlicing"})]})
    render_rejected(path, "spec.replicas: NIM rejects a shared ResourceClaim (resourceClaimName) with replicas > 1")


def test_nim_needs_an_ngc_secret_name(fleet):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(model=nim_model())]}), "a NIM model needs secrets.ngcApiKey")


def test_nim_image_needs_a_tag(fleet):
    w = nim()
    w["spec"]["model"]["image"] = "nvcr.io/nim/meta/llama-3.1-8b-instruct"
    render_rejected(fleet(workloads={"w.yaml": [w]}), "needs an explicit tag")


# ------------------------------------------------------------------------------------------ fabric

def test_fabric_on_a_pool_without_that_partition_size(fleet):
    cluster = cluster_doc(driver="0.5.0-dev", draDriver={"fabric": "partitionAttributes"}, pools=[H100])
    path = fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 8}})]})
    render_rejected(path, "spec.gpu.fabric.partitionSize: no DRA pool of cluster 'c1' offers NVLink partitions of size 8 (offered: [2, 4])")


def test_nvlink_gpus_without_fabric_manager_are_gpus_of_one_nvswitch_node(fleet):
    """No Fabric Manager partitioning (fabric none): on NVSwitch nodes any GPUs of a node are NVLink-connected,
    so four NVLink GPUs are four GPUs of one such node, on every released driver; PCIe pools cannot serve it."""
    pools = [{"name": "l40s", "nodes": 2, "gpu": {"model": "L40S-48GB", "count": 8}}, {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}]
    path = fleet(clusters=[cluster_doc(driver="25.8.1", kubernetes="1.33", pools=pools)],
                 workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]})
    assert gpuc("validate", path).code == 0
    compiled = compile_single(path)
    (request,) = objects_of(compiled, "ResourceClaimTemplate")[0]["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["count"] == 4
    assert "constraints" not in objects_of(compiled, "ResourceClaimTemplate")[0]["spec"]["spec"]["devices"]
    matches = {m.pool.name: m.reason for m in compiled.plan.workloads[0].matches}
    assert matches == {"l40s": "its GPUs are not NVLink-connected (no NVSwitch)", "h100": ""}
    render_rejected(fleet(clusters=[cluster_doc(pools=pools[:1])], workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]}),
                    "no node pool of cluster 'c1' can serve this workload (l40s: its GPUs are not NVLink-connected (no NVSwitch))", code=1)


def test_fabric_hints_lead_somewhere_that_works(fleet):
    """partitionAttributes on an old driver: the hint's second way (fabric none) compiles the same intent."""
    w = {"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]}
    err = render_rejected(fleet(clusters=[cluster_doc(draDriver={"fabric": "partitionAttributes"}, pools=[PARTITIONED_H100])], workloads=w),
                          "use fabric none")
    assert "upgrade draDriver.version to 0.5.1" in err
    assert gpuc("validate", fleet(clusters=[cluster_doc()], workloads=w)).code == 0
    assert gpuc("validate", fleet(clusters=[cluster_doc(driver="0.5.1", draDriver={"fabric": "partitionAttributes"}, pools=[PARTITIONED_H100])], workloads=w)).code == 0


def test_pool_nvlink_partitions_mean_fabric_manager_partitions(fleet):
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=[PARTITIONED_H100])]))  # partitions, fabric none
    assert result.code == 0 and "spec.nodePools[0].nvlink: nvlink.partitions are the Fabric Manager partitions" in result.err
    pcie = [{"name": "l4", "nodes": 1, "gpu": {"model": "L4-24GB", "count": 4}, "nvlink": {"partitions": [2]}}]
    render_rejected(fleet(clusters=[cluster_doc(pools=pcie)]), "spec.nodePools[0].nvlink", "no NVSwitch")


def test_partition_attributes_need_driver_05(fleet):
    render_rejected(fleet(clusters=[cluster_doc(draDriver={"fabric": "partitionAttributes"})]),
                    "spec.draDriver.fabric: fabric 'partitionAttributes' needs driver 0.5 or newer")


def test_topology_only_fields_on_partition_attribute_clusters(fleet):
    cluster = cluster_doc(driver="0.5.0-dev", draDriver={"fabric": "partitionAttributes"}, pools=[PARTITIONED_H100])
    w = workload_doc(gpu={"fabric": {"partitionSize": 2, "minBandwidth": 600}})
    render_rejected(fleet(clusters=[cluster], workloads={"w.yaml": [w]}),
                    "'minBandwidth' belongs to fabric topologyConfig")


@pytest.mark.parametrize("fabric,fragment", [
    ({"strategy": "Manual"}, "strategy Manual needs partitionIDs"),
    ({"strategy": "Manual", "partitionIDs": ["p1"], "partitionSize": 4}, "strategy Manual takes partitionIDs, not partitionSize"),
    ({"strategy": "Auto", "partitionSize": 4, "partitionIDs": ["p1"]}, "partitionIDs are only allowed with strategy Manual"),
    ({"strategy": "Disabled", "partitionSize": 4}, "strategy Disabled takes no partitionSize"),
    ({"strategy": "Auto"}, "strategy Auto needs partitionSize"),
    ({"strategy": "Manual", "partitionIDs": ["p1", "p2"]}, "spec.gpu.count: strategy Manual names partitions but not how many GPUs"),
])
def test_fabric_topology_rules(fleet, fabric, fragment):
    cluster = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"}, pools=[PARTITIONED_H100])
    path = fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc(gpu={"fabric": fabric})]})
    render_rejected(path, fragment)


def test_mps_with_active_fabric_topology(fleet):
    cluster = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"}, pools=[PARTITIONED_H100])
    w = workload_doc(gpu={"sharing": "MPS", "fabric": {"partitionSize": 4}})
    render_rejected(fleet(clusters=[cluster], workloads={"w.yaml": [w]}),
                    "MPS cannot be combined with a fabric topology unless strategy is Disabled")


GKE_ROOT = "/home/kubernetes/bin/nvidia"  # GKE's managed driver: the driver's files, no shell


@pytest.mark.parametrize(("driver", "root", "verdict"), [
    ("25.12.0", GKE_ROOT, "error"),          # held-out review (issue 45): `chroot /driver-root sh` finds no sh there
    ("25.8.1", GKE_ROOT, "error"),           # the same template on every 25.x tag
    ("25.12.0", "/opt/nvidia/root", "warning"),  # unknown: most such roots hold the driver's files only
    ("25.12.0", "/", None),                  # whole root file systems hold a shell
    ("25.12.0", "/run/nvidia/driver", None),
    ("0.4.1", GKE_ROOT, None),               # PR #889: the daemon runs without a shell in the driver root
    ("0.5.1", GKE_ROOT, None),
])
def test_mps_on_a_driver_root_without_a_shell(fleet, driver, root, verdict):
    """facts mpsControlDaemon: templates/mps-control-daemon.tmpl.yaml runs `chroot /driver-root sh -c` up to v25.12.0."""
    kubernetes = "1.33" if driver.startswith("25.8") else "1.34"
    cluster = cluster_doc(driver=driver, kubernetes=kubernetes, draDriver={"version": driver, "nvidiaDriverRoot": root},
                          gpuOperator={"mode": "helm", "version": "v25.10.1"},
                          acknowledge=[{"warning": "driver-upgrade", "reason": "drained"}, {"warning": "dra-beta", "reason": "on"},
                                       {"warning": "helm-capabilities", "reason": "old Helm"}])
    workloads = {"w.yaml": [workload_doc("mps", gpu={"count": 1, "sharing": "MPS"}), workload_doc("ts", gpu={"count": 1, "sharing": "TimeSlicing"})]}
    result = gpuc("validate", fleet(clusters=[cluster], workloads=workloads))
    said = [line for line in result.err.splitlines() if "MPS control daemon" in line]
    if verdict is None:
        assert said == [] and result.code == 0, result.err
        return
    (line,) = said
    assert f"{verdict}: spec.gpu.sharing: the MPS control daemon of driver {driver} runs `chroot {root} sh`" in line
    assert "the daemon does not start and the claim is never prepared" in line
    assert result.code == (2 if verdict == "error" else 0), result.err


def test_topology_config_is_a_warning_about_the_fork(fleet):
    cluster = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"}, pools=[PARTITIONED_H100])
    path = fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]})
    result = gpuc("render", path, "-o", path / "out")
    assert result.code == 0, result.err
    assert "warning: spec.draDriver.fabric" in result.err and "fabiendupont/k8s-dra-driver-gpu" in result.err


# --------------------------------------------------------------------------------------------- MIG

def test_pool_mig_profile_the_model_does_not_have(fleet):
    pool = dict(A100_MIG, mig={"layout": [{"profile": "1g.5gb", "count": 7}]})
    render_rejected(fleet(clusters=[cluster_doc(pools=[pool])]),
                    "spec.nodePools[0].mig.layout[0].profile: A100-80GB has no MIG profile '1g.5gb'")


def test_pool_mig_layout_that_does_not_fit(fleet):
    pool = dict(A100_MIG, mig={"layout": [{"profile": "4g.40gb", "count": 1}, {"profile": "3g.40gb", "count": 1},
                                          {"profile": "1g.10gb", "count": 1}]})
    render_rejected(fleet(clusters=[cluster_doc(pools=[pool])]),
                    "this MIG layout does not fit one A100-80GB: needs 8 compute slices, a GPU has 7")


def test_pool_mig_on_a_gpu_without_mig(fleet):
    pool = {"name": "l4", "nodes": 1, "gpu": {"model": "L4-24GB", "count": 4}, "mig": {"layout": "all-balanced"}}
    render_rejected(fleet(clusters=[cluster_doc(pools=[pool])]), "L4-24GB does not support MIG")


def test_unknown_named_layout(fleet):
    pool = dict(A100_MIG, mig={"layout": "all-balance"})
    render_rejected(fleet(clusters=[cluster_doc(pools=[pool])]), "'all-balance' is not a mig-parted config", "did you mean 'all-balanced'?")


def test_workload_mig_profile_not_offered(fleet):
    w = workload_doc(gpu={"mig": {"slices": [{"profile": "1g.5gb"}]}})
    render_rejected(fleet(clusters=[cluster_doc(pools=[H100, A100_MIG])], workloads={"w.yaml": [w]}),
                    "spec.gpu.mig.slices[0].profile: no MIG pool of cluster 'c1' provides profile '1g.5gb'")


def test_workload_mig_profile_a_layout_change_stranded_is_infeasible(fleet):
    """The GPU model has 1g.10gb but the pool's layout no longer offers it: a plan finding (exit 1), like a
    productName no pool has, so `gpuc diff --fail-on infeasible` catches a layout change that strands a workload."""
    w = workload_doc(gpu={"mig": {"slices": [{"profile": "1g.10gb"}]}})
    pool = dict(A100_MIG, mig={"layout": "all-3g.40gb"})
    err = render_rejected(fleet(clusters=[cluster_doc(pools=[H100, pool])], workloads={"w.yaml": [w]}),
                          "spec.gpu: no node pool of cluster 'c1' can serve this workload", "a100: no MIG 1g.10gb in layout all-3g.40gb", code=1)
    assert "provides profile" not in err


def test_workload_mig_profile_the_gpu_lacks_stays_bad_input_beside_a_stranded_one(fleet):
    w = workload_doc(gpu={"mig": {"sameGpu": False, "slices": [{"profile": "1g.10gb"}, {"profile": "1g.5gb"}]}})
    pool = dict(A100_MIG, mig={"layout": "all-3g.40gb"})
    render_rejected(fleet(clusters=[cluster_doc(pools=[H100, pool])], workloads={"w.yaml": [w]}),
                    "spec.gpu.mig.slices[1].profile: no MIG pool of cluster 'c1' provides profile '1g.5gb'")


def test_workload_mig_mix_that_cannot_fit_one_gpu(fleet):
    w = workload_doc(gpu={"mig": {"slices": [{"profile": "3g.40gb", "count": 2}]}})
    render_rejected(fleet(clusters=[cluster_doc(pools=[H100, A100_MIG])], workloads={"w.yaml": [w]}),
                    "this MIG mix cannot fit one GPU of cluster 'c1'", "lacks 2x 3g.40gb (a GPU has 1)")


def test_mig_mix_across_gpus_is_fine_without_same_gpu(fleet):
    w = workload_doc(gpu={"mig": {"sameGpu": False, "slices": [{"profile": "3g.40gb", "count": 2}]}})
    path = fleet(clusters=[cluster_doc(pools=[H100, A100_MIG])], workloads={"w.yaml": [w]})
    assert gpuc("validate", path).code == 0


# ------------------------------------------------------------------------------- option combinations

@pytest.mark.parametrize("gpu,fragment", [
    ({"shareGroup": "g"}, "shareGroup only applies to sharing Shared, TimeSlicing or MPS"),
    ({"sharing": "MPS", "timeSlicing": {"interval": "Long"}}, "timeSlicing settings need sharing: TimeSlicing (sharing is MPS)"),
    ({"sharing": "TimeSlicing", "mps": {"activeThreadPercentage": 50}}, "mps settings need sharing: MPS"),
    ({"sharing": "MPS", "mps": {"pinnedMemoryLimit": "512Ki"}}, "pinned memory limits must be at least 1Mi"),
    ({"sharing": "Shared", "multiNode": {"nodes": 2}}, "a multi-node workload needs sharing: Exclusive"),
    ({"count": "auto"}, "count: auto sizes from spec.model"),
])
def test_invalid_option_combinations(fleet, gpu, fragment):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(gpu=gpu)]}), fragment)


def test_mig_with_a_time_slicing_interval(fleet):
    w = workload_doc(gpu={"sharing": "TimeSlicing", "timeSlicing": {"interval": "Long"},
                          "mig": {"slices": [{"profile": "1g.10gb"}]}})
    render_rejected(fleet(clusters=[cluster_doc(pools=[A100_MIG])], workloads={"w.yaml": [w]}),
                    "MigDeviceConfig has no timeSlicingConfig")


def test_mig_with_a_gpu_count(fleet):
    w = workload_doc(gpu={"count": 2, "mig": {"slices": [{"profile": "1g.10gb"}]}})
    render_rejected(fleet(clusters=[cluster_doc(pools=[A100_MIG])], workloads={"w.yaml": [w]}),
                    "count applies to full GPUs")


# ------------------------------------------------------------------------------------- driver gates

def test_gates_the_driver_refuses_together(fleet):
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}]
    cluster = cluster_doc(pools=pools)
    w = workload_doc(gpu={"sharing": "MPS"})
    render_rejected(fleet(clusters=[cluster], workloads={"w.yaml": [w]}),
                    "the driver refuses feature gates DynamicMIG and MPSSupport together",
                    "DynamicMIG is derived from the workloads")


def test_user_gate_combination_refused(fleet):
    cluster = cluster_doc(draDriver={"values": {"featureGates": {"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}}})
    render_rejected(fleet(clusters=[cluster]), "refuses feature gates PassthroughSupport and NVMLDeviceHealthCheck")


def test_gate_switched_off_while_workloads_need_it(fleet):
    cluster = cluster_doc(draDriver={"values": {"featureGates": {"TimeSlicingSettings": False}}})
    w = workload_doc(gpu={"sharing": "TimeSlicing"})
    render_rejected(fleet(clusters=[cluster], workloads={"w.yaml": [w]}),
                    "featureGates.TimeSlicingSettings: TimeSlicingSettings is set false, but workloads on this cluster need it (w1)")


def test_a_gate_override_names_only_the_workloads_that_need_the_gate(fleet):
    cluster = cluster_doc(draDriver={"values": {"featureGates": {"MPSSupport": False}}})
    workloads = [workload_doc("plain"), workload_doc("mps", gpu={"sharing": "MPS"}), workload_doc("ts", gpu={"sharing": "TimeSlicing"})]
    render_rejected(fleet(clusters=[cluster], workloads={"w.yaml": workloads}),
                    "MPSSupport is set false, but workloads on this cluster need it (mps)")


def test_a_gate_the_pools_need_names_the_pools(fleet):
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}},
             {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}]
    cluster = cluster_doc(pools=pools, draDriver={"values": {"featureGates": {"DynamicMIG": False}}})
    render_rejected(fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc("plain")]}),
                    "DynamicMIG is set false, but node pools of this cluster need it (dyn)")


def test_gate_from_a_later_driver(fleet):
    cluster = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"values": {"featureGates": {"DynamicMIG": True}}})
    render_rejected(fleet(clusters=[cluster]), "driver 25.8.1 has no feature gate 'DynamicMIG'", "DynamicMIG arrives with driver 25.12")


def test_gate_requirement(fleet):
    cluster = cluster_doc(draDriver={"values": {"featureGates": {"IMEXDaemonsWithDNSNames": False}}})
    render_rejected(fleet(clusters=[cluster]), "feature gate ComputeDomainCliques needs IMEXDaemonsWithDNSNames enabled")


def test_dynamic_mig_needs_driver_2512(fleet):
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}]
    render_rejected(fleet(clusters=[cluster_doc(driver="25.8.1", kubernetes="1.33", pools=pools)]),
                    "dynamic MIG needs driver 25.12 or newer")


# ------------------------------------------------------------------------------------ chart values

def test_dotted_value_key_is_explained(fleet):
    cluster = cluster_doc(draDriver={"values": {"resources.gpus.enabled": "true"}})
    render_rejected(fleet(clusters=[cluster]), "is a dotted key; Helm values are nested maps",
                    "resources:\n            gpus:\n              enabled: true")


@pytest.mark.parametrize("values, message", [
    ({"gpuResourcesEnabledOverride": False}, "gpuResourcesEnabledOverride is set false, but the chart refuses"),
    ({"resources": {"gpus": {"enabled": False}}}, "resources.gpus.enabled is set false, but node pools of this cluster"),
    ({"resources": {"computeDomains": {"enabled": False}}}, "resources.computeDomains.enabled is set false, but multi-node"),
])
def test_user_values_cannot_switch_off_what_the_workloads_need(fleet, values, message):
    w = workload_doc(gpu={"count": 2, "multiNode": {"nodes": 2}})
    render_rejected(fleet(clusters=[cluster_doc(draDriver={"values": values}, pools=[{"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}])], workloads={"w.yaml": [w]}),
                    message, "remove it from draDriver.values: gpuc sets it to true")


GB200_PLUGIN = {"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}, "allocation": "devicePlugin"}
H100_DRA = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}
TRAINER = workload_doc("trainer", gpu={"count": 2, "multiNode": {"nodes": 2}})
CDS_OFF, GPUS_OFF = {"resources": {"computeDomains": {"enabled": False}}}, {"resources": {"gpus": {"enabled": False}}}


@pytest.mark.parametrize(("case", "pool", "workload", "values", "refused"), [
    ("ComputeDomains off, DRA pools, no multi-node workload", H100_DRA, workload_doc(gpu={"count": 1}), CDS_OFF, None),
    ("ComputeDomains off, a multi-node workload on the device plugin", GB200_PLUGIN, TRAINER, CDS_OFF,
     "resources.computeDomains.enabled is set false, but multi-node"),
    ("GPUs off, a multi-node workload on the device plugin", GB200_PLUGIN, TRAINER, GPUS_OFF, None),
    ("GPUs off, DRA pools, no multi-node workload", H100_DRA, workload_doc(gpu={"count": 1}), GPUS_OFF,
     "resources.gpus.enabled is set false, but node pools of this cluster"),
])
def test_a_chart_value_is_judged_by_the_feature_that_needs_it(fleet, tmp_path, case, pool, workload, values, refused):
    """Each derived value may be switched off exactly when its own feature is off, whatever the other feature is:
    ComputeDomains follow multi-node workloads, GPUs follow DRA pools."""
    root = fleet(clusters=[cluster_doc(pools=[pool], draDriver={"values": values})], workloads={"w.yaml": [workload]})
    if refused is not None:
        render_rejected(root, refused, "remove it from draDriver.values: gpuc sets it to true")
    else:
        result = gpuc("render", root, "-o", tmp_path / "out")
        assert result.code == 0 and "is set false" not in result.err, result.err


def test_unknown_chart_value(fleet):
    cluster = cluster_doc(draDriver={"values": {"kubeletPlugin": {"nodeSelectr": {}}}})
    render_rejected(fleet(clusters=[cluster]), "'kubeletPlugin.nodeSelectr' is not a value of chart nvidia-dra-driver-gpu 25.12.0",
                    "did you mean 'nodeSelector'?")


def test_chart_value_from_a_later_release(fleet):
    cluster = cluster_doc(draDriver={"values": {"controller": {"replicas": 2}}})
    render_rejected(fleet(clusters=[cluster]), "controller.replicas arrives with driver 0.4")


def test_string_boolean_chart_value(fleet):
    cluster = cluster_doc(draDriver={"values": {"webhook": {"enabled": "false"}}})
    render_rejected(fleet(clusters=[cluster]), "'false' is a string; Helm treats any non-empty string as true")


def test_default_namespace_is_refused(fleet):
    render_rejected(fleet(clusters=[cluster_doc(draDriver={"namespace": "default"})]),
                    "the DRA driver chart refuses to install into 'default'")


# --------------------------------------------------------------------------------- cluster details

def test_unsupported_kubernetes_version(fleet):
    render_rejected(fleet(clusters=[cluster_doc(kubernetes="1.31")]), "Kubernetes 1.31 is older than DRA with structured parameters")


def test_helm_mode_needs_an_operator_version(fleet):
    render_rejected(fleet(clusters=[cluster_doc(gpuOperator={"mode": "helm", "version": None})]),
                    "gpuOperator.mode 'helm' needs gpuOperator.version")


def test_node_names_must_match_node_count(fleet):
    render_rejected(fleet(clusters=[cluster_doc(pools=[dict(H100, nodeNames=["n1"])])]), "lists 1 names for 2 nodes")


# ----------------------------------------------------------------------------- infeasible: exit 1

def test_no_pool_can_serve_the_workload(fleet):
    w = workload_doc(gpu={"require": {"minMemory": "100Gi"}})
    err = render_rejected(fleet(workloads={"w.yaml": [w]}), "no node pool of cluster 'c1' can serve this workload",
                          "h100: memory is 79.6Gi < 100Gi", code=1)
    assert "nothing was written" in err


def test_model_too_big_for_eight_gpus(fleet):
    w = workload_doc(model=nim_model("405B", precision="fp32"), secrets=NIM_SECRETS)
    render_rejected(fleet(workloads={"w.yaml": [w]}), "does not fit 8 GPUs of any pool", code=1)


def test_more_gpus_than_a_node_has(fleet):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(gpu={"count": 16})]}),
                    "16 GPUs per pod, but the pools that can serve it have at most 8 GPUs per node", code=1)


def test_mig_pools_without_an_operator_gpuc_configures_warn(fleet):
    path = fleet(clusters=[cluster_doc(pools=[A100_MIG], gpuOperator={"mode": "none"})])
    result = gpuc("validate", path)
    assert result.code == 0, result.err
    assert ("spec.gpuOperator.mode: MIG pools need the GPU Operator's migManager to read gpuc's ConfigMap "
            "'gpuc-mig-parted-config' (namespace gpu-operator); with mode none gpuc cannot set that") in result.err
    assert "set migManager.config.name=gpuc-mig-parted-config" in result.err
