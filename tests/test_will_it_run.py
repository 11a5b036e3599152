"""Intents that compile but would fail on a real cluster (issue 15): each is refused with the workload's file,
line and field, nothing written, while the control fleet beside them renders."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import NIM_SECRETS, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc
from tests.test_input_errors import render_rejected

GB200 = {"name": "gb200", "nodes": 4, "gpu": {"model": "GB200-186GB", "count": 4}}
H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}


def seventy_b(**spec):
    model = nim_model("70B", precision="bf16", contextLength=8192, concurrency=8)
    return workload_doc("llama-70b", model=model, gpu={"count": "auto"}, secrets=NIM_SECRETS, **spec)


def test_the_control_fleet_renders(fleet, tmp_path):
    """Multi-node NVLink on GB200 and a 70B model with a 300Gi cache: what the checks below must not refuse."""
    multi = workload_doc("big", model=nim_model("405B", precision="fp8", contextLength=8192, concurrency=8),
                         secrets=NIM_SECRETS, gpu={"count": "auto", "multiNode": {"nodes": 2}},
                         cache={"accessMode": "ReadWriteMany"})
    path = fleet(clusters=[cluster_doc(driver="0.5.1", kubernetes="1.36", pools=[GB200])],
                 workloads={"big.yaml": [multi], "70b.yaml": [seventy_b(cache={"size": "300Gi"})]})
    result = gpuc("render", path, "-o", tmp_path / "out")
    assert result.code == 0, result.err
    assert ": error:" not in result.err
    kinds = {p.read_text().split("kind: ", 1)[1].split("\n", 1)[0] for p in (tmp_path / "out").rglob("*.yaml")
             if "kind: " in p.read_text()}
    assert "ComputeDomain" in kinds


# ------------------------------------------------------------------------------- 2. the model cache

def test_an_unset_cache_is_sized_from_the_model(fleet):
    compiled = compile_single(fleet(workloads={"w.yaml": [seventy_b()]}))
    cache = objects_of(compiled, "NIMCache")[0]
    # 70B at bf16 = 130.4 GiB of files; with 1.3x headroom 169.5 GiB, rounded up to 10 GiB steps
    assert cache["spec"]["storage"]["pvc"]["size"] == "170Gi"
    out = gpuc("explain", fleet(workloads={"w.yaml": [seventy_b()]}), "llama-70b").out
    assert "cache: 170Gi" in out and "130.4 GiB" in out, out


def test_a_cache_smaller_than_the_model_is_refused(fleet):
    render_rejected(fleet(workloads={"w.yaml": [seventy_b(cache={"size": "50Gi"})]}),
                          "workloads/w.yaml:", "spec.cache.size: the model's files take 130.4 GiB",
                          "more than the 50Gi cache", "set cache.size to at least 131Gi", code=1)


def test_the_refused_cache_hint_leads_to_a_render(fleet, tmp_path):
    path = fleet(workloads={"w.yaml": [seventy_b(cache={"size": "131Gi"})]})
    assert gpuc("render", path, "-o", tmp_path / "out").code == 0


# Alternatives of 1, 2 and 4 GPUs leave the tensor parallelism open: the NIM Operator downloads a profile per count,
# so the cache holds all three (8B at bf16: 16e9 bytes of files each, 48e9 in all). Alternatives of one count pin it.
H200 = {"name": "h200", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}}
THREE_COUNTS = [{"count": 1, "require": {"productName": "NVIDIA H200"}}, {"count": 2, "require": {"productName": "NVIDIA H100 80GB HBM3"}},
                {"count": 4, "require": {"architecture": ["Hopper"]}}]
ONE_COUNT = [{"count": 2, "require": {"productName": "NVIDIA H200"}}, {"count": 2, "require": {"productName": "NVIDIA H100 80GB HBM3"}}]


@pytest.mark.parametrize("gpu, size, refusal", [
    # three profiles: exactly their files fit, a byte less does not, nor one or two profiles' worth
    ({"alternatives": THREE_COUNTS}, "48G", None),
    ({"alternatives": THREE_COUNTS}, "47999999999e0", "3 tensor-parallel profiles), more than the 47999999999e0 cache"),
    ({"alternatives": THREE_COUNTS}, "32G", "set cache.size to at least 45Gi"),
    ({"alternatives": THREE_COUNTS}, "16G", "the model's files take 44.7 GiB (8B parameters at bf16, 3 tensor-parallel profiles)"),
    # the count pinned (one count, or no alternatives): one profile's files, to the byte
    ({"alternatives": ONE_COUNT}, "16G", None),
    ({"alternatives": ONE_COUNT}, "15999999999e0", "the model's files take 14.9 GiB (8B parameters at bf16), more than"),
    ({"count": 4}, "16G", None),
    ({"count": 4}, "15999999999e0", "set cache.size to at least 15Gi"),
], ids=["3-profiles-exact", "3-profiles-byte-less", "3-profiles-two-worth", "3-profiles-one-worth",
        "pinned-exact", "pinned-byte-less", "count-exact", "count-byte-less"])
def test_the_cache_holds_every_profile_the_nim_downloads(fleet, tmp_path, gpu, size, refusal):
    w = workload_doc("chat", model=nim_model("8B"), gpu=gpu, secrets=NIM_SECRETS, cache={"size": size})
    path = fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=[dict(H100, nodes=1), H200])], workloads={"w.yaml": [w]})
    if refusal is not None:
        render_rejected(path, "workloads/w.yaml:", "spec.cache.size:", refusal, code=1)
        return
    result = gpuc("render", path, "-o", tmp_path / "out")
    assert result.code == 0, result.err
    (cache,) = [yaml.safe_load(p.read_text()) for p in (tmp_path / "out" / "c1").glob("*-nimcache-*.yaml")]
    assert cache["spec"]["storage"]["pvc"]["size"] == size


@pytest.mark.parametrize("model, gpu, size", [
    ("8B", {"alternatives": THREE_COUNTS}, "60Gi"),   # 48e9 bytes x 1.3 = 58.1 GiB, in 10 GiB steps
    ("8B", {"alternatives": ONE_COUNT}, "50Gi"),      # 16e9 x 1.3 = 19.4 GiB: the 50 GiB minimum
    # 70B, 8 concurrent at 8k: 2 H200s or 4 H100s, 2 profiles of 140e9 bytes: 364e9 bytes = 339.0 GiB
    ("70B", {"alternatives": [{"count": "auto", "require": {"productName": "NVIDIA H200"}},
                              {"count": "auto", "require": {"productName": "NVIDIA H100 80GB HBM3"}}]}, "340Gi"),
])
def test_an_unset_cache_is_sized_for_every_profile(fleet, model, gpu, size):
    w = workload_doc("chat", model=nim_model(model, concurrency=8), gpu=gpu, secrets=NIM_SECRETS)
    path = fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=[dict(H100, nodes=1), H200])], workloads={"w.yaml": [w]})
    (cache,) = objects_of(compile_single(path), "NIMCache")
    assert cache["spec"]["storage"]["pvc"]["size"] == size


# ------------------------------------------------------------------------------- 3. ReadWriteOnce across nodes

def test_a_read_write_once_cache_across_nodes_is_refused(fleet):
    # 2 replicas of 8 GPUs each: one per 8-GPU node, so the one RWO volume would have to attach to both
    w = workload_doc("wide", model=nim_model("8B"), replicas=2, gpu={"count": 8}, secrets=NIM_SECRETS)
    render_rejected(fleet(workloads={"w.yaml": [w]}), "workloads/w.yaml:", "spec.cache.accessMode",
                    "runs 2 pods", "ReadWriteOnce cache volume attaches to one node", "use accessMode ReadWriteMany", code=1)


def test_a_read_write_once_cache_is_refused_even_where_the_plan_packs_one_node(fleet):
    # two 1-GPU replicas: the first-fit plan puts both on one node, but nothing makes the scheduler do so (issue 26)
    w = workload_doc("narrow", model=nim_model("8B"), replicas=2, gpu={"count": 1}, secrets=NIM_SECRETS, clusters=["c1"])
    render_rejected(fleet(workloads={"w.yaml": [w]}), "spec.cache.accessMode", "nothing keeps the scheduler from spreading",
                    "Multi-Attach", code=1)


def test_read_write_many_or_one_pod_is_fine(fleet, tmp_path):
    many = workload_doc("wide", model=nim_model("8B"), replicas=2, gpu={"count": 8}, secrets=NIM_SECRETS,
                        cache={"accessMode": "ReadWriteMany"})
    one_pod = workload_doc("narrow", model=nim_model("8B"), replicas=1, gpu={"count": 1}, secrets=NIM_SECRETS,
                           clusters=["c1"])
    path = fleet(workloads={"w.yaml": [many]})
    result = gpuc("render", path, "-o", tmp_path / "a")
    assert result.code == 0, result.err
    path = fleet(workloads={"w.yaml": [one_pod]})
    result = gpuc("render", path, "-o", tmp_path / "b")
    assert result.code == 0, result.err


def test_read_write_once_pod_with_two_pods_is_refused(fleet):
    w = workload_doc("pair", model=nim_model("8B"), replicas=2, gpu={"count": 1}, secrets=NIM_SECRETS,
                     cache={"accessMode": "ReadWriteOncePod"})
    render_rejected(fleet(workloads={"w.yaml": [w]}), "runs 2 pods, and a ReadWriteOncePod cache volume", code=1)


# ------------------------------------------------------------------------------- 4. unitless memory

@pytest.mark.parametrize("field, spec", [
    ("spec.gpu.require.minMemory", {"count": 1, "require": {"minMemory": "40"}}),
    ("spec.gpu.require.minMemory", {"count": 1, "require": {"minMemory": 40}}),
])
def test_unitless_memory_is_refused_with_the_unit(fleet, field, spec):
    render_rejected(fleet(workloads={"w.yaml": [workload_doc(gpu=spec)]}), "workloads/w.yaml:", field, "40 bytes",
                    'did you mean "40Gi"?')


# ------------------------------------------------------------------------------- 6. from the field

L4 = {"name": "l4", "nodes": 2, "gpu": {"model": "L4-24GB", "count": 4}}
DYNAMIC = {"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}


def test_dynamic_mig_beside_gpus_without_mig_on_a_driver_that_hides_them(fleet):
    """Driver 25.12 runs DynamicMIG on every GPU: the L4 nodes would publish no ResourceSlice (driver #1092)."""
    path = fleet(clusters=[cluster_doc(kubernetes="1.34", driver="25.12.0", pools=[DYNAMIC, L4])])
    render_rejected(path, "clusters/c1.yaml:", "spec.nodePools[1].gpu.model", "node pool 'l4' has L4-24GB GPUs, which have no MIG",
                    "on for pools dyn", "driver issue #1092", "upgrade draDriver.version to 0.4")


def test_dynamic_mig_set_by_hand_names_the_gate_as_the_cause(fleet):
    cluster = cluster_doc(driver="25.12.0", pools=[L4], draDriver={"values": {"featureGates": {"DynamicMIG": True}}})
    render_rejected(fleet(clusters=[cluster]), "set in draDriver.values.featureGates", "or set allocation: devicePlugin")


def test_dynamic_mig_beside_gpus_without_mig_is_fine_from_driver_04(fleet, tmp_path):
    path = fleet(clusters=[cluster_doc(kubernetes="1.34", driver="0.4.1", pools=[DYNAMIC, L4])])
    result = gpuc("render", path, "-o", tmp_path / "out")
    assert result.code == 0, result.err
    assert "#1092" not in result.err


def test_the_device_plugin_hint_of_the_refused_pool_leads_to_a_render(fleet, tmp_path):
    path = fleet(clusters=[cluster_doc(driver="25.12.0", pools=[DYNAMIC, {**L4, "allocation": "devicePlugin"}])])
    result = gpuc("render", path, "-o", tmp_path / "out")
    assert result.code == 0, result.err


def test_dra_pools_under_an_operator_gpuc_does_not_configure_warn_of_double_allocation(fleet):
    result = gpuc("validate", fleet(clusters=[cluster_doc(gpuOperator={"mode": "none"})]))
    assert result.code == 0, result.err
    assert ("spec.gpuOperator.mode: with mode none gpuc cannot keep a device plugin off the DRA pools (h100)") in result.err
    assert "nvidia.com/gpu.deploy.device-plugin=false" in result.err and "use mode patch" in result.err
    assert "[device-plugin-off]" in result.err and "spec.acknowledge: [{warning: device-plugin-off" in result.err
    result = gpuc("validate", fleet(clusters=[cluster_doc(gpuOperator={"mode": "patch"})]))
    assert "device plugin off the DRA pools" not in result.err
    acknowledged = gpuc("validate", fleet(clusters=[cluster_doc(gpuOperator={"mode": "none"}, acknowledge=[
        {"warning": "device-plugin-off", "reason": "our operator install has devicePlugin.enabled=false"}])]))
    assert acknowledged.code == 0 and "device plugin off the DRA pools" not in acknowledged.err, acknowledged.err


def test_the_patched_cluster_policy_keeps_the_device_plugin_off_dra_pools(fleet):
    """The other half of the over-admission guard: where gpuc configures the operator, no device plugin runs on DRA
    nodes (off entirely, or kept off by node label beside device-plugin pools)."""
    compiled = compile_single(fleet(clusters=[cluster_doc(gpuOperator={"mode": "patch"})]))
    policy = yaml.safe_dump([o for o in objects_of(compiled, "ClusterPolicy")])
    assert "devicePlugin:\n      enabled: false" in policy or "devicePlugin:\n    enabled: false" in policy, policy
