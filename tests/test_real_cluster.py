"""Output that passed gpuc's checks and still failed on a real cluster (issue 26): each test pins the upstream
behaviour gpuc now follows, recorded as a fact with its source."""

from __future__ import annotations

import json

import pytest
import yaml
from test_platform_2026 import gpu_cluster_doc
from test_seed_patterns import TEAM_TAINT, tainted_fleet

from compiler.check.operator_chart import chart_failures
from compiler.facts.catalog import gpu_models
from compiler.facts.platform import gpu_operator, nim_operator
from compiler.pipeline import compile_fleet

from check_support import errors_after
from conftest import EXAMPLES, NIM_SECRETS, PARTITIONED_H100, REFERENCE, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc
from test_input_errors import render_rejected

GPU_OPERATOR = REFERENCE / "gpu-operator"


def release_values(compiled, name: str) -> dict:
    return next(r for r in compiled.releases if r.name == name).values


# ---------------------------------------------------------------- 1. the GPU Operator chart's own refusals

@pytest.mark.parametrize("root, driver", [
    ("/", {"enabled": False}),                                   # host-installed: no driver daemonset beside the GPUCluster
    ("/run/nvidia/driver", {"nvidiaDriverCRD": {"enabled": True}}),  # operator-installed: through its NVIDIADriver
])
def test_gpu_cluster_values_pass_the_charts_validations(fleet, root, driver):
    path = fleet(clusters=[gpu_cluster_doc(draDriver={"nvidiaDriverRoot": root})])
    values = release_values(compile_single(path), "gpu-operator")
    assert values["driver"] == driver
    assert chart_failures(values, "v26.7.0") == []
    result = gpuc("validate", path)
    assert result.code == 0 and "GPU driver" not in result.err, result.err  # the operator provides it: no warning


def test_the_chart_refuses_a_gpu_cluster_beside_its_default_driver():
    values = {"clusterPolicy": {"deployCR": False}, "gpuCluster": {"deployCR": True}}  # what gpuc wrote before
    assert chart_failures(values, "v26.7.0") == [
        "the NVIDIADriver CRD must be enabled when deploying a GPUCluster CR, set driver.nvidiaDriverCRD.enabled=true"]
    assert chart_failures({"gpuCluster": {"deployCR": True}}, "v26.7.0")[0].startswith("clusterPolicy.deployCR and")
    assert chart_failures({"devicePlugin": {"config": {"create": True, "name": "x"}}}, "v26.7.0") == [
        "devicePlugin.config.data cannot be empty when devicePlugin.config.create is set to true"]
    assert chart_failures({"gpuCluster": {"deployCR": True}}, "v25.10.1") == []  # no validations.yaml before v26.7


def test_chart_fail_defaults_are_the_charts_defaults():
    reference = yaml.safe_load((GPU_OPERATOR / "values-v26.7.0.yaml").read_text())
    for dotted, default in gpu_operator()["chartFails"]["defaults"].items():
        node = reference
        for part in dotted.split("."):
            node = node[part]
        assert node == default, dotted


def test_every_example_cluster_passes_the_operator_charts_validations():
    for compiled in compile_fleet(EXAMPLES).compiled.values():
        op = compiled.cluster.spec.gpu_operator
        for release in compiled.releases:
            if release.name == "gpu-operator":
                assert chart_failures(release.values, op.version) == [], compiled.name


def test_the_check_stage_refuses_values_the_operator_chart_fails_on():
    def drop_driver(compiled):
        next(r for r in compiled.releases if r.name == "gpu-operator").values.pop("driver")

    errors = errors_after("west", drop_driver)
    assert [e.path for e in errors] == ["spec.gpuOperator"]
    assert "driver.nvidiaDriverCRD.enabled=true" in errors[0].message and errors[0].file.endswith("west.yaml")


# ---------------------------------------------------------------- 2. the device plugin keeps the operator's CDI strategy

@pytest.mark.parametrize("operator", ["v25.10.1", "v25.3.4"])
def test_device_plugin_env_leaves_the_operators_cdi_strategy_alone(fleet, operator):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": "l40s", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"}]
    values = release_values(compile_single(fleet(clusters=[cluster_doc(pools=pools, gpuOperator={"version": operator})])),
                            "gpu-operator")
    assert values["cdi"]["enabled"] is True  # the operator then sets the device plugin's CDI strategy
    owned = set(gpu_operator()["operatorDevicePluginEnv"])
    assert "DEVICE_LIST_STRATEGY" in owned
    assert not [e for e in values["devicePlugin"].get("env", []) if e["name"] in owned]


# ---------------------------------------------------------------- 3. the driver chart's API version and the fork's image

def test_a_driver_chart_that_picks_v1_is_refused_where_the_cluster_does_not_serve_it(fleet):
    render_rejected(fleet(clusters=[cluster_doc(kubernetes="1.33", driver="25.8.1", acknowledge=[])]), "spec.draDriver.version",
                    "resource.k8s.io/v1", "serves resource.k8s.io/v1beta2", "upgrade draDriver.version to 25.12.0")
    # 25.12 takes resourceApiVersion, 1.34 serves v1, and an older Helm can be stated
    for doc in (cluster_doc(kubernetes="1.33", driver="25.12.0"), cluster_doc(kubernetes="1.34", driver="25.8.1"),
                cluster_doc(kubernetes="1.33", driver="25.8.1",
                            acknowledge=[{"warning": "helm-capabilities", "reason": "Argo CD 3.1, Helm 3.18"}])):
        result = gpuc("validate", fleet(clusters=[doc]))
        assert "resourceApiVersion" not in result.err, result.err
    values = release_values(compile_single(fleet(clusters=[cluster_doc(kubernetes="1.33", driver="25.12.0")])),
                            "nvidia-dra-driver-gpu")
    assert values["resourceApiVersion"] == "resource.k8s.io/v1beta2"


def test_topology_config_needs_the_forks_image(fleet):
    ack = [{"warning": "driver-fork", "reason": "we run the fork"}]
    doc = cluster_doc(driver="25.8.1", pools=[dict(PARTITIONED_H100)], draDriver={"fabric": "topologyConfig"}, acknowledge=ack)
    del doc["spec"]["draDriver"]["values"]  # cluster_doc names the fork's image
    render_rejected(fleet(clusters=[doc]), "spec.draDriver.fabric", "refuses unknown gates", "image: {repository:")
    doc["spec"]["draDriver"]["values"] = {"image": {"repository": "nvcr.io/nvidia/k8s-dra-driver-gpu", "tag": "v25.8.1"}}
    render_rejected(fleet(clusters=[doc]), "spec.draDriver.values.image.repository", "FabricTopologySupport")
    doc["spec"]["draDriver"]["values"] = {"image": {"repository": "registry.example.com/dra-fm", "tag": "v25.8.1-fm"}}
    assert gpuc("validate", fleet(clusters=[doc])).code == 0


# ---------------------------------------------------------------- 4, 5, 14. tainted pools: caching Job, NFD, kubelet plugin

def test_what_runs_on_tainted_gpu_nodes_tolerates_their_taints(fleet):
    compiled = compile_single(tainted_fleet(fleet))
    team = {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"}
    caches = {c["metadata"]["labels"]["gpuc.dev/workload"]: c for c in objects_of(compiled, "NIMCache")}
    services = {s["metadata"]["name"]: s for s in objects_of(compiled, "NIMService")}
    assert caches["chat"]["spec"]["tolerations"] == services["chat"]["spec"]["tolerations"]  # the caching Job lands there too
    assert team in caches["chat"]["spec"]["tolerations"] and "tolerations" not in caches["small"]["spec"]
    nfd = release_values(compiled, "gpu-operator")["node-feature-discovery"]["worker"]["tolerations"]
    assert nfd[:3] == gpu_operator()["nfdWorkerTolerations"]["v24.3.0"] and nfd[3:] == [team]


def test_nfd_tolerations_follow_the_operator_version_and_mode(fleet):
    new = release_values(compile_single(tainted_fleet(fleet, gpuOperator={"version": "v26.7.0"})), "gpu-operator")
    assert [t["key"] for t in new["node-feature-discovery"]["worker"]["tolerations"]] == [
        "node-role.kubernetes.io/control-plane", "nvidia.com/gpu", "dedicated"]
    patched = compile_single(tainted_fleet(fleet, gpuOperator={"mode": "patch"}))
    policy = next(o for o in patched.objects if o.kind == "ClusterPolicy")
    assert "node-feature-discovery" not in policy.manifest["spec"]  # not a ClusterPolicy field


def test_nfd_default_tolerations_are_the_charts():
    reference = yaml.safe_load((GPU_OPERATOR / "values-v26.7.0.yaml").read_text())
    assert reference["node-feature-discovery"]["worker"]["tolerations"] == gpu_operator()["nfdWorkerTolerations"]["v26.3.0"]


@pytest.mark.parametrize("driver, chart", [("0.4.1", "v0.4.1"), ("0.5.1", "main-0.5.0-dev"), ("25.12.0", "v25.12.0")])
def test_the_kubelet_plugin_keeps_the_charts_default_tolerations(fleet, driver, chart):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [TEAM_TAINT]}]
    kubernetes = "1.35" if driver.startswith("0.") else "1.34"
    compiled = compile_single(fleet(clusters=[cluster_doc(kubernetes=kubernetes, driver=driver, pools=pools)]))
    values = next(r for r in compiled.releases if r.component == "dra-driver").values
    chart_defaults = yaml.safe_load((REFERENCE / "nvidia-dra-driver-gpu" / chart / "values.yaml").read_text())
    defaults = chart_defaults["kubeletPlugin"]["tolerations"]
    assert values["kubeletPlugin"]["tolerations"] == [*defaults, {"key": "dedicated", "operator": "Equal",
                                                                  "value": "inference", "effect": "NoExecute"}]


# ---------------------------------------------------------------- 6. FabricManagerPartitioning is driver-wide

def partitioned_cluster(pools: list | None = None) -> dict:
    return cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools or [dict(PARTITIONED_H100)],
                       draDriver={"fabric": "partitionAttributes"})


@pytest.mark.parametrize("gpu, refused", [
    ({"count": 2}, True),                                                          # 2 GPUs, but no partition asked for
    ({"count": 2, "fabric": {"partitionSize": 2}}, False),                         # matchAttribute partition2
    ({"count": 3}, True),                                                          # no FM partition of 3 GPUs
    ({"count": 4}, True),                                                          # 4 GPUs, but no partition asked for
    ({"count": 4, "fabric": {"partitionSize": 4}}, False),                         # matchAttribute partition4
    ({"count": 1}, False),                                                         # a GPU is its own partition
])
def test_claims_on_a_partitioning_driver_must_ask_for_a_partition(fleet, gpu, refused):
    # the partitioned workload turns the driver-wide gate on; the other one is judged under it
    workloads = [workload_doc("p", "t", gpu={"count": 8, "fabric": {"partitionSize": 8}}), workload_doc("w", "t", gpu=gpu)]
    root = fleet(clusters=[partitioned_cluster()], workloads={"w.yaml": workloads})
    result = gpuc("validate", root)
    if refused:
        assert result.code == 1 and "FabricManagerPartitioning" in result.err and "partitionSize" in result.err, result.err
        assert "workloads/w.yaml" in result.err
    else:
        assert result.code == 0, result.err


def test_a_partitioning_driver_refuses_pools_without_fabric_manager(fleet):
    l40s = {"name": "l40s", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}}
    workloads = {"w.yaml": [workload_doc("p", "t", gpu={"count": 8, "fabric": {"partitionSize": 8}})]}
    render_rejected(fleet(clusters=[partitioned_cluster([dict(PARTITIONED_H100), l40s])], workloads=workloads),
                    "spec.nodePools[1].gpu.model", "no Fabric Manager", "allocation: devicePlugin")
    assert gpuc("validate", fleet(clusters=[partitioned_cluster([dict(PARTITIONED_H100), l40s])])).code == 0  # gate off
    l40s["allocation"] = "devicePlugin"
    assert gpuc("validate", fleet(clusters=[partitioned_cluster([dict(PARTITIONED_H100), l40s])], workloads=workloads)).code == 0


# ---------------------------------------------------------------- 7. DRA itself is off by default on 1.32 and 1.33

@pytest.mark.parametrize("kubernetes, runtime", [("1.32", "resource.k8s.io/v1beta1=true"),
                                                 ("1.33", "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true")])
def test_dra_on_132_and_133_is_a_warning_with_the_runtime_config(fleet, kubernetes, runtime):
    result = gpuc("validate", fleet(clusters=[cluster_doc(kubernetes=kubernetes, acknowledge=[])]))
    assert result.code == 0 and "spec.kubernetesVersion: DynamicResourceAllocation" in result.err, result.err
    assert "off by default" in result.err and f"--runtime-config={runtime}" in result.err and "[dra-beta]" in result.err
    ack = [{"warning": "dra-beta", "reason": "the API server runs with the gate and the beta API on"}]
    assert "DynamicResourceAllocation" not in gpuc("validate", fleet(clusters=[cluster_doc(kubernetes=kubernetes, acknowledge=ack)])).err
    assert "DynamicResourceAllocation" not in gpuc("validate", fleet(clusters=[cluster_doc(kubernetes="1.34")])).err


def test_the_catalog_says_dra_is_off_by_default_before_134():
    versions = {v["version"]: v for v in json.loads(gpuc("catalog", "--output", "json").out)["kubernetesVersions"]}
    for version, on in (("1.32", False), ("1.33", False), ("1.34", True)):
        assert ("DynamicResourceAllocation" in versions[version]["draGatesOnByDefault"]) is on


# ---------------------------------------------------------------- 8. mode none: the DRA plugin and the device plugin split the nodes

def test_mode_none_keeps_the_dra_plugin_on_dra_nodes_beside_the_standalone_device_plugin(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc(gpuOperator={"mode": "none"})]))  # one pool, DRA only
    label = gpu_operator()["draNodeLabel"]
    plugin = next(r for r in compiled.releases if r.component == "dra-driver").values["kubeletPlugin"]
    assert plugin["nodeSelector"] == {label: "true"}
    terms = compiled.advice["values/nvidia-device-plugin.yaml"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all({"key": label, "operator": "NotIn", "values": ["true"]} in t["matchExpressions"] for t in terms)
    assert compiled.node_labels["h100"][label] == "true"  # what the DRA pool's nodes carry
    helm = compile_single(fleet(clusters=[cluster_doc()]))  # the operator's device plugin is off: nothing to split
    assert "kubeletPlugin" not in next(r for r in helm.releases if r.component == "dra-driver").values


# ---------------------------------------------------------------- 17. multiNode: count is GPUs per pod, one pod per node

GB200 = {"name": "gb200", "nodes": 4, "gpu": {"model": "GB200-186GB", "count": 4}}


def test_count_over_a_node_names_the_split_with_or_without_multi_node(fleet):
    multi = workload_doc("t", "r", gpu={"count": 16, "multiNode": {"nodes": 2}})
    err = render_rejected(fleet(clusters=[cluster_doc(pools=[dict(GB200)])], workloads={"w.yaml": [multi]}), "spec.gpu.count", code=1)
    assert "use multiNode for more" not in err  # it is set already
    assert "each of the replica's 2 pods on its own node): for 32 GPUs per replica use count: 4 with multiNode.nodes: 8" in err
    single = workload_doc("t", "r", gpu={"count": 16})
    err = render_rejected(fleet(clusters=[cluster_doc(pools=[dict(GB200)])], workloads={"w.yaml": [single]}), "spec.gpu.count", code=1)
    assert "for 16 GPUs per replica use count: 4 with multiNode.nodes: 4" in err


def test_explain_shows_the_pods_nodes_and_compute_domain_of_a_multi_node_replica(fleet):
    h100 = {"name": "h100", "nodes": 4, "gpu": {"model": "H100-80GB", "count": 8}}
    workloads = {"w.yaml": [workload_doc("nv", "r", replicas=2, gpu={"count": 4, "multiNode": {"nodes": 2}}, clusters=["c1"]),
                            workload_doc("net", "r", gpu={"count": 8, "multiNode": {"nodes": 2}}, clusters=["c2"])]}
    root = fleet(clusters=[cluster_doc("c1", pools=[dict(GB200)]), cluster_doc("c2", pools=[h100])], workloads=workloads)
    nv = json.loads(gpuc("explain", root, "r/nv", "--output", "json").out)["clusters"][0]
    assert nv["gpusPerReplica"] == 8
    assert {k: nv["multiNode"][k] for k in ("podsPerReplica", "gpusPerPod", "replicas", "pods", "nodes")} == {
        "podsPerReplica": 2, "gpusPerPod": 4, "replicas": 2, "pods": 4, "nodes": 4}
    assert nv["multiNode"]["computeDomain"].startswith("nv-")
    text = gpuc("explain", root, "r/net").out
    assert "multi-node: each replica is 2 pods, one per node, each with 8 GPU(s) (gpu.count is per pod) = 16 GPU(s) per replica" in text
    assert "no ComputeDomain: the serving pools have no multi-node NVLink" in text
    plan = json.loads(gpuc("plan", root, "--cluster", "c1", "--output", "json").out)["clusters"][0]["pods"]
    assert [(p["pod"], p["replica"], p.get("rank", 0)) for p in plan] == [("nv-0-0", 0, 0), ("nv-0-1", 0, 1), ("nv-1-0", 1, 0),
                                                                          ("nv-1-1", 1, 1)]
    assert len({p["node"] for p in plan}) == 4  # one node per pod


# ---------------------------------------------------------------- 9. dynamic MIG nodes keep the MIG Manager off

def test_dynamic_mig_pools_keep_the_mig_manager_off_and_say_what_enables_mig_mode(fleet):
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}},
             # on the device plugin: a static DRA MIG pool beside dynamic MIG is refused (test 15)
             {"name": "static", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"},
              "allocation": "devicePlugin"}]
    doc = cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)
    compiled = compile_single(fleet(clusters=[doc]))
    facts = gpu_operator()
    assert compiled.node_labels["dyn"] == {facts["draNodeLabel"]: "true", facts["migManagerDeployLabel"]: "false",
                                           facts["devicePluginDeployLabel"]: "false"}
    assert compiled.node_labels["static"][facts["migConfigLabel"]] == "all-balanced"  # the MIG Manager partitions it
    config = yaml.safe_load(next(o for o in compiled.objects if o.kind == "ConfigMap").manifest["data"]["config.yaml"])
    assert "all-enabled" not in config["mig-configs"]
    # Hopper: the kubelet plugin turns MIG mode on itself, so nothing warns (test_the_mig_mode_warning_follows_the_architecture)
    assert "mig-mode" not in gpuc("validate", fleet(clusters=[doc])).err


@pytest.mark.parametrize(("model", "driver", "warns"), [
    ("H100-80GB", "0.5.1", False),    # held-out review (issue 45): Hopper toggles MIG mode without a reset, and the
    ("H100-80GB", "25.12.0", False),  # plugin turns it on at the first MIG device (and off again at start-up)
    ("B200-180GB", "0.5.1", False),
    ("A100-80GB", "0.5.1", True),     # Ampere: enabling takes a GPU reset, so it must be on before the plugin starts
    ("A30-24GB", "25.12.0", True),
])
def test_the_mig_mode_warning_follows_the_architecture(fleet, model, driver, warns):
    """facts dynamicMig migModeToggle and the MIG-mode paragraph: nvlib.go supportsMIGModeToggle, maybeDisableMigMode."""
    kubernetes = "1.36" if driver.startswith("0.") else "1.34"
    doc = cluster_doc(kubernetes=kubernetes, driver=driver,
                      pools=[{"name": "dyn", "nodes": 1, "gpu": {"model": model, "count": 8}, "mig": {"layout": "dynamic"}}])
    result = gpuc("validate", fleet(clusters=[doc]))
    said = [line for line in result.err.splitlines() if "[mig-mode]" in line]
    assert bool(said) == warns, result.err
    if warns:
        (line,) = said
        arch = gpu_models()[model].architecture
        assert f"spec.nodePools[0].mig.layout: nothing gpuc writes enables MIG mode on the {arch} GPUs of dynamic-MIG pool(s) dyn" in line
        assert f"the kubelet plugin turns MIG mode on itself only on Blackwell and Hopper GPUs (on {arch} that takes a GPU reset)" in line
        assert ("driver 0.4+ publishes them as whole GPUs without MIG" in line) == driver.startswith("0.")
        doc["spec"]["acknowledge"] = [{"warning": "mig-mode", "reason": "the node image runs nvidia-smi -mig 1"}]
        assert "mig-mode" not in gpuc("validate", fleet(clusters=[doc])).err


# ---------------------------------------------------------------- 10. Argo CD assesses the Applications of an app-of-apps

def test_argocd_learns_application_health_so_the_waves_between_applications_hold():
    from test_argocd_health import health

    compiled = compile_fleet(EXAMPLES).compiled["prod-east"]
    patch = next(o for o in compiled.gitops if o.kind == "ConfigMap")
    assert "resource.customizations.health.argoproj.io_Application" in patch.manifest["data"]
    waves = {o.name: o.wave for o in compiled.gitops if o.kind == "Application"}
    assert waves["prod-east-gpuc"] > waves["prod-east-nvidia-dra-driver-gpu"]  # the order that health makes real
    assert health("argoproj.io_Application", {"status": {"health": {"status": "Healthy"}}})["status"] == "Healthy"
    assert health("argoproj.io_Application", {"status": {"health": {"status": "Degraded", "message": "x"}}}) == {
        "status": "Degraded", "message": "x"}
    assert health("argoproj.io_Application", {"spec": {}})["status"] == "Progressing"  # not synced yet: the next wave waits


# ---------------------------------------------------------------- 11. NIMs that share GPUs are capped to their share

def test_nims_sharing_a_gpu_cap_their_engine_memory_to_their_share():
    compiled = compile_fleet(EXAMPLES).compiled["prod-east"]
    assert nim_operator()["sharedGpuEnv"] == ["NIM_GPU_MEM_FRACTION", "NIM_KVCACHE_PERCENT"]
    shares = {}
    for o in compiled.objects:
        if o.kind == "NIMService":
            env = {e["name"]: e["value"] for e in o.manifest["spec"].get("env", [])}
            shares[o.name] = env
    shared = {n: float(e["NIM_GPU_MEM_FRACTION"]) for n, e in shares.items() if e}
    assert set(shared) == {"llama-1b-guard", "qwen-1-5b-router"}  # the time-sliced pair; the exclusive NIMs keep theirs
    assert sum(shared.values()) <= 0.9 and all(shares[n]["NIM_KVCACHE_PERCENT"] == shares[n]["NIM_GPU_MEM_FRACTION"]
                                                for n in shared)
    assert shared["qwen-1-5b-router"] > shared["llama-1b-guard"]  # in proportion to the sized need


def test_a_fractional_nim_is_capped_to_its_memory(fleet):
    w = workload_doc("small", "t", model=nim_model("1B"), secrets=NIM_SECRETS,
                     gpu={"sharing": "Fractional", "memory": "20Gi"}, cache={"accessMode": "ReadWriteMany"})
    compiled = compile_single(fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1")], workloads={"w.yaml": [w]}))
    env = next(o for o in objects_of(compiled, "NIMService"))["spec"]["env"]
    h100 = gpu_models()["H100-80GB"].memory_bytes
    assert env[0] == {"name": "NIM_GPU_MEM_FRACTION", "value": f"{int(100 * 20 * 1024**3 / h100) / 100:.2f}"}


# ---------------------------------------------------------------- 12. driver upgrades and the DRA kubelet plugin

def test_the_kubelet_plugin_never_selects_the_label_a_cluster_policy_sweeps(fleet):
    """GPU Operator v26.7.0 deletes nvidia.com/gpu.deploy.dra-driver from every node outside gpuCluster mode (its
    labelling pass, proved in tests/real/test_real_gpu_operator.py): a plugin selecting it would leave every node."""
    facts = gpu_operator()
    evict, dra = facts["draDriverDeployLabel"], facts["draNodeLabel"]
    for version in ("v25.10.1", "v26.3.0", "v26.7.0"):
        compiled = compile_single(fleet(clusters=[cluster_doc(gpuOperator={"version": version}, acknowledge=[])]))
        values = next(r for r in compiled.releases if r.component == "dra-driver").values
        assert evict not in values.get("kubeletPlugin", {}).get("nodeSelector", {}), version
        assert evict not in compiled.node_labels["h100"] and compiled.node_labels["h100"][dra] == "true", version
        result = gpuc("validate", fleet(clusters=[cluster_doc(gpuOperator={"version": version}, acknowledge=[])]))
        assert "spec.gpuOperator.mode: the GPU Operator installs the GPU driver beside a ClusterPolicy" in result.err, version
        assert "[driver-upgrade]" in result.err and "drain the DRA nodes before each GPU driver upgrade" in result.err
    ack = cluster_doc(gpuOperator={"version": "v26.7.0"},
                      acknowledge=[{"warning": "driver-upgrade", "reason": "drained by the maintenance runbook"}])
    assert gpuc("validate", fleet(clusters=[ack])).err == ""
    host = cluster_doc(gpuOperator={"version": "v26.7.0"}, draDriver={"nvidiaDriverRoot": "/"}, acknowledge=[])
    assert gpuc("validate", fleet(clusters=[host])).err == ""  # no operator driver to upgrade


# ---------------------------------------------------------------- 14. a multi-node NIM needs LeaderWorkerSet

LWS_CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
           "spec": {"group": "leaderworkerset.x-k8s.io", "scope": "Namespaced",
                    "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets", "singular": "leaderworkerset"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_a_multi_node_nim_says_it_needs_leader_worker_set_until_the_cluster_declares_it(fleet, tmp_path):
    h100 = {"name": "h100", "nodes": 4, "gpu": {"model": "H100-80GB", "count": 8}}
    nim = workload_doc("big", "ai", model=nim_model("405B"), secrets=NIM_SECRETS, gpu={"count": 8, "multiNode": {"nodes": 2}},
                       cache={"accessMode": "ReadWriteMany"})
    root = fleet(clusters=[cluster_doc(pools=[h100], gpuOperator={"version": "v26.7.0"})], workloads={"w.yaml": [nim]})
    result = gpuc("validate", root)
    assert result.code == 0, result.err
    assert "NIMService ai/big spec.multiNode: a multi-node NIM runs as a LeaderWorkerSet (leaderworkerset.x-k8s.io)" in result.err
    crds = tmp_path / "crds"
    crds.mkdir()
    (crds / "lws.yaml").write_text(yaml.safe_dump(LWS_CRD))
    assert "LeaderWorkerSet" not in gpuc("validate", root, "--crds", crds).err


# ---------------------------------------------------------------- 15. dynamic and static MIG in one cluster

def test_dynamic_mig_beside_a_static_mig_pool_is_refused(fleet):
    """The DynamicMIG gate is cluster-wide, and a kubelet plugin in that mode destroys at start the MIG devices it did
    not create (DestroyUnknownMIGDevices): the static pool's layout would be torn down under its pods."""
    dynamic = {"name": "h100-dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}
    static = {"name": "a100-mig", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
    ack = [{"warning": "mig-mode", "reason": "the node image enables MIG mode"},
           {"warning": "driver-upgrade", "reason": "drained before upgrades"}]
    mixed = gpuc("validate", fleet(clusters=[cluster_doc(pools=[dynamic, static], acknowledge=ack)]))
    assert mixed.code == 2, mixed.err
    assert "spec.nodePools[0].mig.layout: dynamic MIG on pool 'h100-dyn' turns the driver's DynamicMIG gate on" in mixed.err
    assert "the static layout of pool(s) 'a100-mig'" in mixed.err and "make every DRA MIG pool of the cluster dynamic" in mixed.err
    both_dynamic = [dynamic, {**static, "mig": {"layout": "dynamic"}}]
    assert gpuc("validate", fleet(clusters=[cluster_doc(pools=both_dynamic, acknowledge=ack)])).code == 0
    on_device_plugin = [dynamic, {**static, "allocation": "devicePlugin"}]  # the DRA plugin stays off that pool
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=on_device_plugin, acknowledge=ack)]))
    assert "DynamicMIG gate" not in result.err, result.err
    # the gate set in the chart values, with no pool asking for dynamic MIG, does the same to the static layout
    gated = cluster_doc(pools=[static], acknowledge=ack, draDriver={"values": {"featureGates": {"DynamicMIG": True}}})
    result = gpuc("validate", fleet(clusters=[gated]))
    assert result.code == 2 and ("spec.draDriver.values.featureGates.DynamicMIG: draDriver.values turn the driver's DynamicMIG "
                                 "gate on for every node") in result.err, result.err


def test_the_mig_manager_stays_off_every_pool_the_gate_partitions(fleet):
    """With the gate on for one pool, a whole-GPU Hopper pool is partitioned too (facts dynamicMig): the MIG Manager
    there would apply all-disabled and clear the MIG devices the plugin creates for running pods."""
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}},
             {"name": "h200", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}},
             {"name": "l40s", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}}]  # no MIG: the gate leaves it alone
    facts = gpu_operator()
    labels = compile_single(fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)])).node_labels
    assert labels["h200"] == {facts["draNodeLabel"]: "true", facts["migManagerDeployLabel"]: "false"}
    assert labels["l40s"] == {facts["draNodeLabel"]: "true", facts["migConfigLabel"]: "all-disabled"}
