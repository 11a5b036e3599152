"""Lowering rules (DESIGN.md section 4): each test pins the exact fields that matter."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import NIM_SECRETS, PARTITIONED_H100, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc
from test_input_errors import render_rejected

A100_MIG = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "nvlink": {"partitions": [2, 4, 8]}}
L40S_DP = {"name": "l40s", "nodes": 2, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"}


def one(items: list) -> dict:
    assert len(items) == 1, items
    return items[0]


def release(compiled, component: str):
    return next(r for r in compiled.releases if r.component == component)


# ----------------------------------------------------------------------------- 4.1 DRA driver release

@pytest.mark.parametrize("driver,chart,repo", [
    ("25.3.2", "nvidia-dra-driver-gpu", "https://helm.ngc.nvidia.com/nvidia"),
    ("25.12.0", "nvidia-dra-driver-gpu", "https://helm.ngc.nvidia.com/nvidia"),
    ("0.4.1", "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts"),
])
def test_driver_chart_per_version(fleet, driver, chart, repo):
    r = release(compile_single(fleet(clusters=[cluster_doc(driver=driver)])), "dra-driver")
    assert (r.chart.name, r.chart.repository, r.chart.version) == (chart, repo, driver)
    assert r.namespace == "nvidia-dra-driver-gpu"


def test_driver_values_for_gpu_resources_and_compute_domains(fleet):
    w = workload_doc(gpu={"count": 4, "multiNode": {"nodes": 2}})
    values = release(compile_single(fleet(clusters=[cluster_doc(pools=[{"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}])], workloads={"w.yaml": [w]})), "dra-driver").values
    assert values["gpuResourcesEnabledOverride"] is True
    assert values["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": True}}
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert values["resourceApiVersion"] == "resource.k8s.io/v1"


def test_compute_domains_off_without_multi_node(fleet):
    values = release(compile_single(fleet()), "dra-driver").values
    assert values["resources"]["computeDomains"] == {"enabled": False}
    assert "featureGates" not in values


def test_feature_gates_derived_from_workloads(fleet):
    ws = [workload_doc("a", gpu={"sharing": "TimeSlicing"}), workload_doc("b", gpu={"sharing": "MPS"})]
    values = release(compile_single(fleet(workloads={"w.yaml": ws})), "dra-driver").values
    assert values["featureGates"] == {"MPSSupport": True, "TimeSlicingSettings": True}


def test_driver_253_has_no_gates_for_sharing(fleet):
    cluster = cluster_doc(driver="25.3.2", kubernetes="1.32")
    values = release(compile_single(fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc(gpu={"sharing": "MPS"})]})), "dra-driver").values
    assert "featureGates" not in values and "resourceApiVersion" not in values


def test_user_values_are_deep_merged_over_derived(fleet):
    cluster = cluster_doc(draDriver={"values": {"featureGates": {"NVMLDeviceHealthCheck": True}, "kubeletPlugin": {"priorityClassName": "x"}}})
    values = release(compile_single(fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc(gpu={"sharing": "TimeSlicing"})]})), "dra-driver").values
    assert values["featureGates"] == {"TimeSlicingSettings": True, "NVMLDeviceHealthCheck": True}
    assert values["kubeletPlugin"] == {"priorityClassName": "x"}


def test_fabric_gates_per_flavour(fleet):
    lab = cluster_doc(driver="0.5.0-dev", draDriver={"fabric": "partitionAttributes"}, pools=[PARTITIONED_H100])
    values = release(compile_single(fleet(clusters=[lab], workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]})), "dra-driver").values
    assert values["featureGates"] == {"FabricManagerPartitioning": True}
    stg = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"}, pools=[PARTITIONED_H100])
    values = release(compile_single(fleet(clusters=[stg], workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]})), "dra-driver").values
    assert values["featureGates"] == {"FabricTopologySupport": True}


def test_dynamic_mig_gate(fleet):
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}]
    values = release(compile_single(fleet(clusters=[cluster_doc(pools=pools)])), "dra-driver").values
    assert values["featureGates"] == {"DynamicMIG": True}


# ------------------------------------------------------------------------------- 4.2 node config

def test_gpu_operator_values_for_a_dra_cluster(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[H100, A100_MIG])]))
    values = release(compiled, "gpu-operator").values
    assert values["cdi"] == {"enabled": True}
    assert values["devicePlugin"] == {"enabled": False}
    assert values["driver"] == {"enabled": True}
    assert values["toolkit"]["env"] == [
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"},
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"}]
    assert values["mig"] == {"strategy": "mixed"}
    assert values["migManager"]["config"] == {"name": "gpuc-mig-parted-config", "default": "all-disabled"}
    assert compiled.node_labels == {"h100": {"nvidia.com/gpu.dra": "true", "nvidia.com/mig.config": "all-disabled"},
                                    "a100": {"nvidia.com/gpu.dra": "true", "nvidia.com/mig.config": "all-balanced"}}


def test_mixed_cluster_keeps_the_device_plugin_off_dra_nodes(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[H100, L40S_DP])]))
    values = release(compiled, "gpu-operator").values
    assert values["devicePlugin"] == {"enabled": True}  # the operator's CDI device-list strategy stays (issue 26)
    assert compiled.node_labels["h100"] == {"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/gpu.dra": "true"}
    assert compiled.node_labels["l40s"] == {}
    assert release(compiled, "dra-driver").values["kubeletPlugin"] == {"nodeSelector": {"nvidia.com/gpu.dra": "true"}}


def test_patch_mode_emits_a_partial_cluster_policy(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc(gpuOperator={"mode": "patch"})]))
    assert not [r for r in compiled.releases if r.component == "gpu-operator"]
    policy = one([o for o in compiled.objects if o.kind == "ClusterPolicy"])
    assert policy.patch and policy.manifest["apiVersion"] == "nvidia.com/v1" and policy.name == "cluster-policy"
    assert policy.manifest["spec"]["cdi"] == {"enabled": True}
    assert "labels" not in policy.manifest["metadata"]  # never claim ownership of the operator's object
    assert "ServerSideApply=true" in policy.manifest["metadata"]["annotations"]["argocd.argoproj.io/sync-options"]
    # the operator's own install manages these fields: the Pulumi patch must take them over, not fail on the conflict
    assert policy.manifest["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"


def test_custom_mig_layout_gets_a_mig_parted_config(fleet):
    pool = dict(A100_MIG, mig={"layout": [{"profile": "3g.40gb"}, {"profile": "2g.20gb"}]})
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[H100, pool])]))
    cm = one(objects_of(compiled, "ConfigMap"))
    assert cm["metadata"]["namespace"] == "gpu-operator"
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["mig-configs"]["gpuc-a100"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 1, "3g.40gb": 1}}]
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert compiled.node_labels["a100"]["nvidia.com/mig.config"] == "gpuc-a100"
    # a mix equal to a named layout is that layout (the same config and label: no repartitioning)
    named = dict(A100_MIG, mig={"layout": [{"profile": "3g.40gb", "count": 2}]})
    assert compile_single(fleet(clusters=[cluster_doc(pools=[named])])).node_labels["a100"]["nvidia.com/mig.config"] == "all-3g.40gb"


def test_named_mig_layout_filters_by_device_id(fleet):
    config = yaml.safe_load(one(objects_of(compile_single(fleet(clusters=[cluster_doc(pools=[A100_MIG])])), "ConfigMap"))["data"]["config.yaml"])
    assert config["mig-configs"]["all-balanced"] == [{"device-filter": ["0x20B210DE", "0x20B510DE"], "devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]


@pytest.mark.parametrize("operator", [{"mode": "helm", "version": "v25.10.1"}, {"mode": "patch"}, {"mode": "none"},
                                      {"mode": "gpuCluster", "version": "v26.7.0"}], ids=lambda o: o["mode"])
def test_node_names_become_label_patches(fleet, operator):
    """In every operator mode: gpuCluster mode once had none, and a cluster moved to it kept the ClusterPolicy mode's
    Node patches, which Argo CD does not prune (Delete=false), OutOfSync for good (tests/real/test_real_transitions.py)."""
    driver = "0.5.1" if operator["mode"] == "gpuCluster" else "25.12.0"
    compiled = compile_single(fleet(clusters=[cluster_doc(driver=driver, gpuOperator=operator,
                                                          pools=[dict(H100, nodeNames=["gpu-1", "gpu-2"])])]))
    nodes = [o for o in compiled.objects if o.kind == "Node"]
    assert [n.name for n in nodes] == ["gpu-1", "gpu-2"]
    assert all(n.patch and n.manifest["metadata"]["labels"] == {"nvidia.com/gpu.dra": "true"} for n in nodes)
    assert all(n.manifest["metadata"]["annotations"]["pulumi.com/patchForce"] == "true" for n in nodes)


def test_host_installed_driver_turns_the_operator_driver_off(fleet):
    cluster = cluster_doc(draDriver={"nvidiaDriverRoot": "/"})
    assert release(compile_single(fleet(clusters=[cluster])), "gpu-operator").values["driver"] == {"enabled": False}



GKE_ROOT = "/home/kubernetes/bin/nvidia"


@pytest.mark.parametrize(("mode", "version", "root", "install_dir"), [
    ("helm", "v25.10.1", GKE_ROOT, GKE_ROOT),         # held-out review (issue 45): the validator never found it
    ("helm", "v24.6.0", "/opt/nvidia", "/opt/nvidia"),  # the first chart with the value
    ("patch", "v26.7.0", GKE_ROOT, GKE_ROOT),         # the same field in the partial ClusterPolicy
    ("helm", "v25.10.1", "/", None),                  # the host's standard paths: the validator's first try
    ("helm", "v25.10.1", "/run/nvidia/driver", None),  # the operator's own root, its default
    ("gpuCluster", "v26.7.0", GKE_ROOT, GKE_ROOT),    # as before: the GPUCluster carries it always
])
def test_a_host_driver_outside_the_standard_roots_gets_driver_install_dir(fleet, mode, version, root, install_dir):
    """facts operators.yaml driverInstallDir: the operator's driver validation finds a host driver under another root
    only through hostPaths.driverInstallDir (cmd/nvidia-validator/main.go, object_controls.go)."""
    driver = "0.5.1" if mode == "gpuCluster" else "25.12.0"
    cluster = cluster_doc(driver=driver, draDriver={"version": driver, "nvidiaDriverRoot": root},
                          gpuOperator={"mode": mode, "version": version},
                          acknowledge=[{"warning": "driver-upgrade", "reason": "drained"}])
    compiled = compile_single(fleet(clusters=[cluster]))
    if mode == "patch":
        spec = one([o for o in compiled.objects if o.kind == "ClusterPolicy"]).manifest["spec"]
    else:
        spec = release(compiled, "gpu-operator").values
    assert (spec.get("hostPaths") or {}).get("driverInstallDir") == install_dir


def test_an_operator_without_driver_install_dir_is_refused_for_a_host_driver_outside_the_standard_roots(fleet):
    cluster = cluster_doc(draDriver={"nvidiaDriverRoot": GKE_ROOT}, gpuOperator={"mode": "helm", "version": "v24.3.0"})
    result = gpuc("validate", fleet(clusters=[cluster]))
    assert result.code == 2 and ("spec.gpuOperator.version: GPU Operator v24.3.0 has no hostPaths.driverInstallDir: its driver "
                                 f"validation looks for the GPU driver on the host's standard paths and under /run/nvidia/driver "
                                 f"only, never under {GKE_ROOT}") in result.err, result.err
    assert "upgrade gpuOperator.version to v24.6.0 or newer" in result.err


# -------------------------------------------------------------------------------- 4.3 DeviceClasses

def test_device_class_cel_starts_from_driver_and_type(fleet):
    cls = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "big.example.com"},
           "spec": {"require": {"architecture": ["Hopper", "Blackwell"], "minMemory": "79Gi", "minComputeCapability": "9.0"}}}
    dc = one(objects_of(compile_single(fleet(workloads={"c.yaml": [cls]})), "DeviceClass"))
    assert dc["apiVersion"] == "resource.k8s.io/v1"
    assert [s["cel"]["expression"] for s in dc["spec"]["selectors"]] == [
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Blackwell']",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0",
    ]


def test_mig_device_class(fleet):
    cls = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "small-mig"},
           "spec": {"mig": {"slices": [{"profile": "1g.10gb"}, {"profile": "2g.20gb"}]}}}
    dc = one(objects_of(compile_single(fleet(clusters=[cluster_doc(pools=[A100_MIG])], workloads={"c.yaml": [cls]})), "DeviceClass"))
    assert [s["cel"]["expression"] for s in dc["spec"]["selectors"]] == [
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        "device.attributes['gpu.nvidia.com'].profile in ['1g.10gb', '2g.20gb']",
    ]


def test_a_platform_class_goes_to_its_clusters_only(fleet):
    """A MIG class for the MIG cluster must not make the cluster without MIG fail its selector check."""
    cls = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "small-mig"},
           "spec": {"clusters": ["mig"], "mig": {"slices": [{"profile": "1g.10gb"}]}}}
    path = fleet(clusters=[cluster_doc("mig", pools=[A100_MIG]), cluster_doc("plain", pools=[H100])], workloads={"c.yaml": [cls]})
    assert [o["metadata"]["name"] for o in objects_of(compile_single(path, "mig"), "DeviceClass")] == ["small-mig"]
    assert objects_of(compile_single(path, "plain"), "DeviceClass") == []
    everywhere = fleet(clusters=[cluster_doc("mig", pools=[A100_MIG]), cluster_doc("plain", pools=[H100])],
                       workloads={"c.yaml": [dict(cls, spec={"mig": cls["spec"]["mig"]})]})
    result = gpuc("validate", everywhere)  # unused on 'plain' and matching nothing there: a warning, not a failure
    assert result.code == 0, result.err
    assert "DeviceClass small-mig: selector" in result.err and "no workload on this cluster uses the class" in result.err
    assert "list the clusters it is for in the class's spec.clusters (this is 'plain')" in result.err


def test_builtin_classes_are_never_emitted(fleet):
    compiled = compile_single(fleet(workloads={"w.yaml": [workload_doc()]}))
    assert not objects_of(compiled, "DeviceClass")


# ----------------------------------------------------------------------------------------- 4.4 claims

@pytest.mark.parametrize("kubernetes,driver,api,flat", [
    ("1.34", "25.12.0", "resource.k8s.io/v1", False),
    ("1.33", "25.8.1", "resource.k8s.io/v1beta2", False),
    ("1.32", "25.3.2", "resource.k8s.io/v1beta1", True),
])
def test_exclusive_claim_template_per_api_version(fleet, kubernetes, driver, api, flat):
    compiled = compile_single(fleet(clusters=[cluster_doc(kubernetes=kubernetes, driver=driver)],
                                    workloads={"w.yaml": [workload_doc(gpu={"count": 2})]}))
    rct = one(objects_of(compiled, "ResourceClaimTemplate"))
    assert rct["apiVersion"] == api
    assert rct["metadata"]["namespace"] == "team" and rct["metadata"]["name"].startswith("w1-gpu-")
    request = one(rct["spec"]["spec"]["devices"]["requests"])
    body = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}
    assert request == ({"name": "gpu", **body} if flat else {"name": "gpu", "exactly": body})
    assert not objects_of(compiled, "ResourceClaim")


def test_time_slicing_share_group_is_one_named_claim(fleet):
    ws = [workload_doc(n, gpu={"sharing": "TimeSlicing", "shareGroup": "pool-a", "timeSlicing": {"interval": "Medium"}})
          for n in ("a", "b")]
    compiled = compile_single(fleet(workloads={"w.yaml": ws}))
    claim = one(objects_of(compiled, "ResourceClaim"))
    assert claim["metadata"]["name"].startswith("pool-a-")
    assert claim["metadata"]["annotations"]["gpuc.dev/share-group-members"] == "a,b"
    config = one(claim["spec"]["devices"]["config"])
    assert config == {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Medium"}}}}}
    assert compiled.claims["team/a"] == compiled.claims["team/b"]
    assert not objects_of(compiled, "ResourceClaimTemplate")


def test_time_slicing_always_carries_an_explicit_interval(fleet):
    claim = one(objects_of(compile_single(fleet(workloads={"w.yaml": [workload_doc(gpu={"sharing": "TimeSlicing"})]})), "ResourceClaim"))
    params = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params["sharing"]["timeSlicingConfig"] == {"interval": "Default"}


def test_mps_config(fleet):
    w = workload_doc(gpu={"sharing": "MPS", "mps": {"activeThreadPercentage": 25, "pinnedMemoryLimit": "8Gi"}})
    params = one(objects_of(compile_single(fleet(workloads={"w.yaml": [w]})), "ResourceClaim"))["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params["sharing"] == {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25, "defaultPinnedDeviceMemoryLimit": "8Gi"}}


def test_plain_shared_claim_has_no_sharing_config(fleet):
    claim = one(objects_of(compile_single(fleet(workloads={"w.yaml": [workload_doc(replicas=3, gpu={"sharing": "Shared"})]})), "ResourceClaim"))
    assert "config" not in claim["spec"]["devices"]


def test_mig_mix_requests_and_parent_uuid(fleet):
    w = workload_doc(gpu={"mig": {"slices": [{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]}})
    rct = one(objects_of(compile_single(fleet(clusters=[cluster_doc(pools=[A100_MIG])], workloads={"w.yaml": [w]})), "ResourceClaimTemplate"))
    devices = rct["spec"]["spec"]["devices"]
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"], r["exactly"]["selectors"][0]["cel"]["expression"])
            for r in devices["requests"]] == [
        ("mig-3g-40gb", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"),
        ("mig-1g-10gb", "mig.nvidia.com", 2, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")]
    assert devices["constraints"] == [{"requests": ["mig-3g-40gb", "mig-1g-10gb"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]


def test_mig_shared_uses_mig_device_config_without_time_slicing_config(fleet):
    w = workload_doc(gpu={"sharing": "TimeSlicing", "mig": {"slices": [{"profile": "2g.20gb"}]}})
    claim = one(objects_of(compile_single(fleet(clusters=[cluster_doc(pools=[A100_MIG])], workloads={"w.yaml": [w]})), "ResourceClaim"))
    params = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}
    assert "constraints" not in claim["spec"]["devices"]  # one device: nothing to co-locate


def test_claim_names_change_with_their_spec(fleet):
    def name(count):
        return one(objects_of(compile_single(fleet(workloads={"w.yaml": [workload_doc(gpu={"count": count})]})), "ResourceClaimTemplate"))["metadata"]["name"]
    assert name(1) == name(1)
    assert name(1) != name(2)


def test_require_becomes_request_selectors(fleet):
    w = workload_doc(gpu={"require": {"productName": "NVIDIA H100 80GB HBM3", "minDriverVersion": "550", "cel": ["device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"]}})
    rct = one(objects_of(compile_single(fleet(workloads={"w.yaml": [w]})), "ResourceClaimTemplate"))
    exprs = [s["cel"]["expression"] for s in rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"]]
    assert exprs == ["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
                     "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0",
                     "device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"]


# ----------------------------------------------------------------------------- 4.5 ComputeDomain

@pytest.mark.parametrize("driver,num_nodes", [("25.12.0", 4), ("0.4.1", None)])
def test_compute_domain(fleet, driver, num_nodes):
    w = workload_doc(replicas=2, gpu={"count": 4, "multiNode": {"nodes": 2}})
    compiled = compile_single(fleet(clusters=[cluster_doc(driver=driver, pools=[{"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}])], workloads={"w.yaml": [w]}))
    cd = one(objects_of(compiled, "ComputeDomain"))
    assert cd["apiVersion"] == "resource.nvidia.com/v1beta1"
    assert cd["spec"].get("numNodes") == num_nodes
    assert cd["spec"]["channel"] == {"resourceClaimTemplate": {"name": cd["metadata"]["name"] + "-channel"}}
    assert compiled.channels["team/w1"] == cd["metadata"]["name"] + "-channel"


# ----------------------------------------------------------------------------------- 4.6 fabric

def test_partition_attributes_fabric(fleet):
    cluster = cluster_doc(driver="0.5.0-dev", draDriver={"fabric": "partitionAttributes"}, pools=[PARTITIONED_H100])
    rct = one(objects_of(compile_single(fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc(gpu={"fabric": {"partitionSize": 4}})]})), "ResourceClaimTemplate"))
    devices = rct["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 4
    assert devices["constraints"] == [{"requests": ["gpu"], "matchAttribute": "gpu.nvidia.com/partition4"}]
    assert "config" not in devices


def test_topology_config_fabric(fleet):
    cluster = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"}, pools=[PARTITIONED_H100])
    w = workload_doc(gpu={"sharing": "TimeSlicing", "fabric": {"strategy": "Manual", "partitionIDs": ["p0", "p1"], "maxLatency": 0.2}, "count": 4})
    claim = one(objects_of(compile_single(fleet(clusters=[cluster], workloads={"w.yaml": [w]})), "ResourceClaim"))
    params = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params["fabricTopologyConfig"] == {"strategy": "Manual", "virtualizationModel": "BareMetal",
                                              "partitionIds": ["p0", "p1"], "maxLatency": 0.2}
    assert params["sharing"]["strategy"] == "TimeSlicing"
    assert "constraints" not in claim["spec"]["devices"]


# ---------------------------------------------------------------------------------------- 4.7 NIM

def test_nim_cache_and_service(fleet):
    w = workload_doc("llama", "nim", model=nim_model("70B", engine="tensorrt_llm"), replicas=2,
                     cache={"size": "200Gi", "storageClass": "fast"}, expose={"port": 9000, "type": "LoadBalancer"}, secrets=NIM_SECRETS)
    compiled = compile_single(fleet(workloads={"w.yaml": [w]}))
    cache = one(objects_of(compiled, "NIMCache"))
    assert cache["apiVersion"] == "apps.nvidia.com/v1alpha1"
    assert cache["spec"]["source"]["ngc"] == {
        "modelPuller": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3", "authSecret": "ngc-api-secret", "pullSecret": "ngc-secret",
        "model": {"precision": "bf16", "tensorParallelism": "2", "engine": "tensorrt_llm"}}  # 159 GiB: 79.5 per GPU fits 79.6 GiB
    assert cache["spec"]["storage"]["pvc"] == {"create": True, "size": "200Gi", "storageClass": "fast", "volumeAccessMode": "ReadWriteOnce"}
    service = one(objects_of(compiled, "NIMService"))
    rct = one(objects_of(compiled, "ResourceClaimTemplate"))
    assert service["spec"]["draResources"] == [{"resourceClaimTemplateName": rct["metadata"]["name"]}]
    assert service["spec"]["image"] == {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.8.3",
                                        "pullPolicy": "IfNotPresent", "pullSecrets": ["ngc-secret"]}
    assert service["spec"]["replicas"] == 2 and service["spec"]["expose"] == {"service": {"type": "LoadBalancer", "port": 9000}}
    # named after what it caches: another image or model profile is another NIMCache (its model puller is immutable)
    assert re.fullmatch(r"llama-[0-9a-f]{8}", cache["metadata"]["name"])
    assert service["spec"]["storage"]["nimCache"] == {"name": cache["metadata"]["name"], "profile": ""}
    nim_object = next(o for o in compiled.objects if o.kind == "NIMService")
    assert [r.path for r in nim_object.replacements] == ["spec.draResources"] and nim_object.replacements[0].delete_first


def test_shared_nim_uses_the_named_claim(fleet):
    w = workload_doc(model=nim_model("1B"), secrets=NIM_SECRETS, gpu={"sharing": "TimeSlicing", "shareGroup": "small"})
    compiled = compile_single(fleet(workloads={"w.yaml": [w]}))
    claim = one(objects_of(compiled, "ResourceClaim"))
    assert one(objects_of(compiled, "NIMService"))["spec"]["draResources"] == [{"resourceClaimName": claim["metadata"]["name"]}]


def test_multi_node_nim_references_the_compute_domain(fleet):
    w = workload_doc(model=nim_model("405B", precision="fp8"), secrets=NIM_SECRETS, gpu={"count": 4, "multiNode": {"nodes": 2}})
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[{"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}])], workloads={"w.yaml": [w]}))
    cd = one(objects_of(compiled, "ComputeDomain"))
    assert one(objects_of(compiled, "NIMService"))["spec"]["multiNode"] == {
        "backendType": "lws", "parallelism": {"tensor": 4, "pipeline": 2},
        "computeDomain": {"create": False, "name": cd["metadata"]["name"]}}


def test_multi_node_without_nvlink_across_nodes_runs_without_a_compute_domain(fleet):
    """H100 HGX nodes have NVLink only within a node: a ComputeDomain would never become Ready, so the nodes
    of a replica talk over the network, and the NIM runs multi-node over LWS without one."""
    w = workload_doc(model=nim_model("405B", precision="fp8"), secrets=NIM_SECRETS, gpu={"count": 8, "multiNode": {"nodes": 2}})
    compiled = compile_single(fleet(workloads={"w.yaml": [w]}))
    assert objects_of(compiled, "ComputeDomain") == []
    assert one(objects_of(compiled, "NIMService"))["spec"]["multiNode"] == {
        "backendType": "lws", "parallelism": {"tensor": 8, "pipeline": 2}}
    assert release(compiled, "dra-driver").values["resources"]["computeDomains"] == {"enabled": False}
    assert not compiled.channels


def test_multi_node_on_mixed_hardware_is_refused_with_the_fix(fleet):
    pools = [{"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}, {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}]
    w = workload_doc(gpu={"count": 4, "multiNode": {"nodes": 2}})
    render_rejected(fleet(clusters=[cluster_doc(pools=pools)], workloads={"w.yaml": [w]}), "spec.gpu.multiNode",
                    "gb200 (multi-node NVLink) and h100 (no NVLink across nodes)", "narrow gpu.require", code=1)


# ------------------------------------------------------------------------------------ every object

def test_every_object_is_labelled_annotated_and_waved(fleet):
    w = workload_doc(model=nim_model(), secrets=NIM_SECRETS)
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[H100, A100_MIG])], workloads={"inference/w.yaml": [w]}))
    waves = {"Namespace": 1, "ConfigMap": 1, "ResourceClaimTemplate": 3, "NIMCache": 4, "NIMService": 5}
    for obj in compiled.objects:
        meta = obj.manifest["metadata"]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "gpuc"
        assert meta["annotations"]["argocd.argoproj.io/sync-wave"] == str(waves[obj.kind])
        expected_source = "workloads/inference/w.yaml#0" if obj.kind != "ConfigMap" else "clusters/c1.yaml#0"
        assert meta["annotations"]["gpuc.dev/source"] == expected_source


def test_argocd_applications(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc(driver="0.4.1")]))
    apps = {a.name: a.manifest for a in compiled.gitops if a.kind == "Application"}
    assert sorted(apps) == ["c1-dra-driver-nvidia-gpu", "c1-gpu-operator", "c1-gpuc", "c1-nim-operator"]
    driver = apps["c1-dra-driver-nvidia-gpu"]["spec"]
    assert driver["sources"][0] == {"repoURL": "registry.k8s.io/dra-driver-nvidia/charts", "chart": "dra-driver-nvidia-gpu",
                                    "targetRevision": "0.4.1",
                                    "helm": {"releaseName": "dra-driver-nvidia-gpu",
                                             "valueFiles": ["$values/rendered/c1/values/dra-driver-nvidia-gpu.yaml"]}}
    assert driver["sources"][1] == {"repoURL": "https://git.example.com/fleet.git", "targetRevision": "main", "ref": "values"}
    assert driver["destination"] == {"name": "c1", "namespace": "nvidia-dra-driver-gpu"}
    rendered = apps["c1-gpuc"]
    assert rendered["spec"]["source"]["path"] == "rendered/c1"
    assert rendered["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "1"
    assert driver and apps["c1-gpu-operator"]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "0"
    for app in apps.values():  # a first sync can fail while CRDs arrive: Argo CD retries only when told to
        assert app["spec"]["syncPolicy"]["retry"]["limit"] == 5


def test_first_sync_and_pruning_options(fleet):
    """Custom resources survive the dry run before their CRDs exist; namespaces are never pruned with their
    contents; the partial ClusterPolicy keeps its server-side-apply patch options."""
    w = workload_doc(model=nim_model(), secrets=NIM_SECRETS,
                     gpu={"count": 2, "multiNode": {"nodes": 2}, "require": {"architecture": ["Blackwell"]}})
    cluster = cluster_doc(pools=[H100, {"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}], gpuOperator={"mode": "patch"})
    compiled = compile_single(fleet(clusters=[cluster], workloads={"w.yaml": [w]}))
    options = {o.kind: o.manifest["metadata"]["annotations"].get("argocd.argoproj.io/sync-options") for o in compiled.objects}
    for kind in ("ComputeDomain", "NIMCache", "NIMService"):
        assert options[kind] == "SkipDryRunOnMissingResource=true", kind
    assert options["ClusterPolicy"] == "ServerSideApply=true,Prune=false,Delete=false,SkipDryRunOnMissingResource=true"
    assert options["Namespace"] == "Prune=false"
    assert options["ResourceClaimTemplate"] is None  # built-in kinds need neither


def test_reserved_namespaces_get_no_namespace_object(fleet):
    """A workload without a namespace lands in `default`: gpuc must not own (and Argo CD prune) it, nor
    kube-system."""
    plain = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": "w"}, "spec": {"gpu": {"count": 1}}}
    system = workload_doc("s", "kube-system", gpu={"count": 1})
    own = workload_doc("o", "team", gpu={"count": 1})
    compiled = compile_single(fleet(workloads={"w.yaml": [plain, system, own]}))
    assert [o["metadata"]["name"] for o in objects_of(compiled, "Namespace")] == ["team"]
    assert {o["metadata"]["namespace"] for o in objects_of(compiled, "ResourceClaimTemplate")} == {"default", "kube-system", "team"}


def test_nim_names_leave_room_for_the_names_the_nim_operator_derives(fleet):
    """The operator names a NIMService's container '<name>-ctr' and a NIMCache's Job '<name>-job' (DNS labels, 63 at
    most) and validates no length: a longer name is accepted and never runs. A 59-character workload fits, its
    hash-named cache included; a 60-character one is refused at its name."""
    def nim(name: str) -> dict:
        return workload_doc(name, "nim", model=nim_model("8B"), secrets=NIM_SECRETS, gpu={"count": 1})

    longest = "n" * 59
    compiled = compile_single(fleet(clusters=[cluster_doc("c1")], workloads={"w.yaml": [nim(longest)]}))
    cache = objects_of(compiled, "NIMCache")[0]["metadata"]["name"]
    assert len(cache) <= 59 and cache.startswith("n" * 50) and len(cache + "-job") <= 63
    assert len(objects_of(compiled, "NIMService")[0]["metadata"]["name"] + "-ctr") <= 63
    err = render_rejected(fleet(clusters=[cluster_doc("c1")], workloads={"w.yaml": [nim("n" * 60)]}),
                          "w.yaml:", "error: metadata.name: '" + "n" * 60 + "' is 60 characters",
                          "shorten metadata.name to at most 59 characters")
    assert err.count(": error:") == 1
