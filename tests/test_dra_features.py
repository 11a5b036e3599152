"""What DRA can do in 2026 (issue 14): prioritized alternatives (firstAvailable), fractional GPU memory
(consumable capacity, driver 0.5 ConsumableShares) and the extended-resource bridge (KEP-5004)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import yaml

from compiler.cel import Quantity
from compiler.place.inventory.capacity import CapacityError, consumption, fits
from compiler.place.inventory.model import Device, RequestPolicy

from conftest import (
    NIM_SECRETS,
    REFERENCE,
    cluster_doc,
    compile_single,
    gpuc,
    nim_model,
    objects_of,
    workload_doc,
)
from test_input_errors import render_rejected

H100 = {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}
H200 = {"name": "h200", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}}
ALTERNATIVES = [{"count": 1, "require": {"productName": "NVIDIA H200"}},
                {"count": 2, "require": {"architecture": ["Hopper"], "minMemory": "70Gi"}}]


def platform(kubernetes: str = "1.36", driver: str = "0.5.1", pools: list | None = None, **spec) -> dict:
    return cluster_doc(kubernetes=kubernetes, driver=driver, pools=pools or [dict(H100), dict(H200)], **spec)


def claim_requests(compiled, workload: str) -> list[dict]:
    (rct,) = [o for o in objects_of(compiled, "ResourceClaimTemplate") if o["metadata"]["name"].startswith(f"{workload}-gpu")]
    return rct["spec"]["spec"]["devices"]["requests"]


def plan_json(path) -> dict:
    result = gpuc("plan", path, "--output", "json")
    assert result.code in (0, 1), result.err
    return json.loads(result.out)


def pods_of(plan: dict, workload: str) -> list[dict]:
    return [p for c in plan["clusters"] for p in c["pods"] if p["workload"].endswith(f"/{workload}")]


# ------------------------------------------------------------------------------------- held-out fleet

def test_the_issue_fleet_compiles_and_plans(fleet):
    """Kubernetes 1.36 + driver 0.5.1, an H100 and an H200 pool: alternatives, and four 16Gi fractions of one GPU."""
    workloads = [workload_doc("flex", "team", gpu={"alternatives": ALTERNATIVES}),
                 workload_doc("frac", "team", replicas=4, gpu={"sharing": "Fractional", "memory": "16Gi"})]
    path = fleet(clusters=[platform()], workloads={"w.yaml": workloads})
    assert gpuc("validate", path).code == 0
    compiled = compile_single(path)
    (request,) = claim_requests(compiled, "flex")
    assert [(a["name"], a["count"]) for a in request["firstAvailable"]] == [("alt-0", 1), ("alt-1", 2)]
    (fraction,) = claim_requests(compiled, "frac")
    assert fraction["exactly"]["capacity"] == {"requests": {"memory": "16Gi"}}
    values = next(r for r in compiled.releases if r.component == "dra-driver").values
    assert values["consumableShares"] == "memory" and values["featureGates"]["ConsumableShares"] is True
    plan = plan_json(path)
    assert plan["ok"]
    frac = pods_of(plan, "frac")
    assert len(frac) == 4 and len({(p["node"], p["claims"][0]["devices"][0]["device"]) for p in frac}) == 1
    assert all(p["claims"][0]["devices"][0]["consumedCapacity"] == {"memory": "16Gi"} for p in frac)
    (flex,) = pods_of(plan, "flex")
    assert flex["node"] == "h200-0" and [d["request"] for d in flex["claims"][0]["devices"]] == ["gpu/alt-0"]


def test_a_fifth_fraction_that_does_not_fit_goes_to_another_gpu(fleet):
    workloads = [workload_doc("a-four", "team", replicas=4, gpu={"sharing": "Fractional", "memory": "16Gi"}),
                 workload_doc("b-fifth", "team", gpu={"sharing": "Fractional", "memory": "20Gi"})]
    plan = plan_json(fleet(clusters=[platform(pools=[dict(H100)])], workloads={"w.yaml": workloads}))
    four = {p["claims"][0]["devices"][0]["device"] for p in pods_of(plan, "a-four")}
    (fifth,) = pods_of(plan, "b-fifth")
    assert len(four) == 1 and fifth["claims"][0]["devices"][0]["device"] not in four  # 64 GiB + 20 GiB > 79.6 GiB


def test_exclusive_claims_still_take_whole_gpus_when_gpus_are_shareable(fleet):
    workloads = [workload_doc("frac", "team", gpu={"sharing": "Fractional", "memory": "8Gi"}),
                 workload_doc("whole", "team", replicas=8, gpu={"count": 1})]
    plan = plan_json(fleet(clusters=[platform(pools=[dict(H100)])], workloads={"w.yaml": workloads}))
    assert not plan["ok"]  # 8 whole GPUs + a fraction do not fit 8 GPUs: no exclusive claim shares
    devices = [p["claims"][0]["devices"][0]["device"] for p in pods_of(plan, "whole") if p["node"]]
    assert len(devices) == len(set(devices))


def test_the_scheduler_prefers_the_node_of_an_earlier_alternative(fleet):
    """Node order puts h100 first, but the first alternative only fits the H200s: the plan goes there."""
    path = fleet(clusters=[platform()], workloads={"w.yaml": [workload_doc("flex", "team", replicas=9, gpu={"alternatives": ALTERNATIVES})]})
    pods = pods_of(plan_json(path), "flex")
    on_h200 = [p for p in pods if p["node"] == "h200-0"]
    assert len(on_h200) == 8 and all(p["claims"][0]["devices"][0]["request"] == "gpu/alt-0" for p in on_h200)
    (spill,) = [p for p in pods if p["node"] == "h100-0"]  # H200s full: the second alternative, on the H100s
    assert [d["request"] for d in spill["claims"][0]["devices"]] == ["gpu/alt-1", "gpu/alt-1"]


# --------------------------------------------------------------------------------------- alternatives

def test_alternatives_are_sized_each_and_the_nim_cache_follows(fleet):
    model = nim_model("8B")
    alternatives = [{"count": "auto", "require": {"productName": "NVIDIA H200"}},
                    {"count": "auto", "require": {"productName": "NVIDIA H100 80GB HBM3"}}]
    same = workload_doc("same", "ai", model=model, gpu={"alternatives": alternatives}, secrets=NIM_SECRETS)
    big = nim_model("70B", concurrency=8)  # 176 GiB: 2 H200s, or 4 H100s
    differ = workload_doc("differ", "ai", model=big, gpu={"alternatives": alternatives}, secrets=NIM_SECRETS)
    compiled = compile_single(fleet(clusters=[platform()], workloads={"w.yaml": [same, differ]}))
    caches = {o["metadata"]["labels"]["gpuc.dev/workload"]: o["spec"]["source"]["ngc"]["model"] for o in objects_of(compiled, "NIMCache")}
    assert caches["same"]["tensorParallelism"] == "1"
    assert "tensorParallelism" not in caches["differ"]  # 2 H200s or 4 H100s: the cache keeps every profile
    (request,) = claim_requests(compiled, "differ")
    assert [a["count"] for a in request["firstAvailable"]] == [2, 4]
    explained = gpuc("explain", fleet(clusters=[platform()], workloads={"w.yaml": [differ]}), "differ").out
    assert "alternative 1 (firstAvailable, tried in order): 2 GPU(s)" in explained and "caches every tensor-parallel profile" in explained


@pytest.mark.parametrize("kubernetes, code, fragment", [
    ("1.32", 2, "Kubernetes 1.32 does not have the DRAPrioritizedList feature gate"),
    ("1.33", 0, "DRAPrioritizedList (requests[].firstAvailable (prioritized alternatives)) is alpha and off by default"),
])
def test_alternatives_need_the_prioritized_list(fleet, kubernetes, code, fragment):
    cluster = cluster_doc(kubernetes=kubernetes, driver="25.12.0" if kubernetes == "1.33" else "25.3.2", pools=[dict(H100)])
    result = gpuc("validate", fleet(clusters=[cluster], workloads={"w.yaml": [workload_doc("f", "t", gpu={"alternatives": ALTERNATIVES[1:]})]}))
    assert result.code == code and fragment in result.err, result.err


def test_an_alternative_no_pool_serves_is_a_warning_and_none_an_error(fleet):
    some = workload_doc("some", "t", gpu={"alternatives": [{"count": 1, "require": {"productName": "NVIDIA B200"}}, {"count": 1}]})
    result = gpuc("validate", fleet(clusters=[platform()], workloads={"w.yaml": [some]}))
    assert result.code == 0 and "alternative 1 cannot be satisfied" in result.err and "spec.gpu.alternatives[0]" in result.err
    none = workload_doc("none", "t", gpu={"alternatives": [{"count": 1, "require": {"productName": "NVIDIA B200"}}]})
    render_rejected(fleet(clusters=[platform()], workloads={"w.yaml": [none]}), "no alternative can be satisfied", code=1)


@pytest.mark.parametrize("gpu, fragments", [
    ({"alternatives": ALTERNATIVES, "mig": {"slices": [{"profile": "1g.10gb"}]}}, ["spec.gpu.mig", "do not combine with gpu.mig"]),
    ({"alternatives": [{"count": "auto"}]}, ["spec.gpu.alternatives[0].count", "sizes from spec.model"]),
    ({"alternatives": [{"count": 1, "class": "nope.example.com"}]}, ["spec.gpu.alternatives[0].class", "unknown device class"]),
    ({"alternatives": [{"count": 1, "require": {"architecture": ["Hoper"]}}]},
     ["spec.gpu.alternatives[0].require.architecture[0]", "did you mean 'Hopper'?"]),
])
def test_bad_alternatives_name_the_field(fleet, gpu, fragments):
    render_rejected(fleet(clusters=[platform()], workloads={"w.yaml": [workload_doc("f", "t", gpu=gpu)]}), *fragments)


# --------------------------------------------------------------------------------------- fractional

@pytest.mark.parametrize("cluster, workloads, fragments, code", [
    (dict(driver="25.12.0"), [], ["this cluster uses Fractional, which needs driver 0.5"], 2),
    (dict(kubernetes="1.33", driver="0.5.1"), [], ["Kubernetes 1.33 does not have the DRAConsumableCapacity feature gate"], 2),
    ({}, [workload_doc("mps", "t", gpu={"count": 1, "sharing": "MPS"})], ["spec.gpu.sharing", "does not support MPS sharing"], 2),
    ({}, [], [], 0),
])
def test_fractional_needs_the_driver_the_cluster_and_no_mps(fleet, cluster, workloads, fragments, code):
    frac = workload_doc("frac", "t", gpu={"sharing": "Fractional", "memory": "16Gi"})
    doc = platform(**{k: v for k, v in cluster.items() if k in ("kubernetes", "driver")})
    path = fleet(clusters=[doc], workloads={"w.yaml": [frac, *workloads]})
    if code:
        render_rejected(path, *fragments, code=code)
    else:
        assert gpuc("validate", path).code == 0


def test_fractional_on_135_warns_about_the_alpha_gate(fleet):
    frac = workload_doc("frac", "t", gpu={"sharing": "Fractional", "memory": "16Gi"})
    result = gpuc("validate", fleet(clusters=[platform(kubernetes="1.35")], workloads={"w.yaml": [frac]}))
    assert result.code == 0 and "DRAConsumableCapacity" in result.err and "alpha and off by default" in result.err


@pytest.mark.parametrize("gpu, fragments", [
    ({"sharing": "Fractional", "memory": "16Gi", "count": 2}, ["spec.gpu.count", "count is 1"]),
    ({"sharing": "Fractional", "memory": "16Gi", "mig": {"slices": [{"profile": "1g.10gb"}]}}, ["spec.gpu.mig", "does not combine"]),
    ({"sharing": "Fractional", "memory": "16Gi", "shareGroup": "g"}, ["spec.gpu.shareGroup"]),
    ({"sharing": "Fractional", "memory": "16", "count": 1}, ["spec.gpu.memory", "means 16 bytes", 'did you mean "16Gi"?']),
])
def test_bad_fractional_intents_name_the_field(fleet, gpu, fragments):
    render_rejected(fleet(clusters=[platform()], workloads={"w.yaml": [workload_doc("f", "t", gpu=gpu)]}), *fragments)


def test_a_model_larger_than_its_fraction_is_refused(fleet):
    nim = workload_doc("nim", "ai", model=nim_model("70B"), gpu={"sharing": "Fractional", "memory": "16Gi"}, secrets=NIM_SECRETS)
    render_rejected(fleet(clusters=[platform()], workloads={"w.yaml": [nim]}), "spec.gpu.memory", "the model needs", "raise gpu.memory", code=1)


def test_fractional_is_refused_on_mig_pools(fleet):
    pools = [{"name": "mig", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}]
    frac = workload_doc("frac", "t", gpu={"sharing": "Fractional", "memory": "16Gi"})
    render_rejected(fleet(clusters=[platform(pools=pools)], workloads={"w.yaml": [frac]}),
                    "MIG-partitioned on demand; fractional GPU memory needs whole GPUs", code=1)


def test_fractional_in_gpu_cluster_mode_reaches_the_kubelet_plugin(fleet):
    doc = platform(kubernetes="1.37", gpuOperator={"mode": "gpuCluster", "version": "v26.7.0"}, draDriver={"nvidiaDriverRoot": "/"})
    compiled = compile_single(fleet(clusters=[doc], workloads={"w.yaml": [workload_doc("f", "t", gpu={"sharing": "Fractional", "memory": "8Gi"})]}))
    dra = next(r for r in compiled.releases if r.name == "gpu-operator").values["draDriver"]
    assert dra["gpus"] == {"kubeletPlugin": {"env": [{"name": "CONSUMABLE_SHARES", "value": "memory"}]}}
    assert dra["featureGates"] == {"ConsumableShares": True}


def test_the_synthesized_inventory_publishes_what_the_05_driver_does_with_consumable_shares(fleet):
    path = fleet(clusters=[platform(pools=[dict(H100)])], workloads={"w.yaml": [workload_doc("f", "t", gpu={"sharing": "Fractional", "memory": "8Gi"})]})
    listing = yaml.safe_load(gpuc("inventory", path, "--cluster", "c1").out)
    gpu = listing["items"][0]["spec"]["devices"][0]
    assert gpu["allowMultipleAllocations"] is True
    # the valid range ends at the device's memory: applyConsumableShares (cmd/gpu-kubelet-plugin/consumable_shares.go,
    # main) sets Max in every mode, and the real plugin publishes it (tests/real/test_real_kubelet_plugin.py); the
    # demo README names only default, min and step
    assert gpu["capacity"]["memory"] == {"value": "81559Mi", "requestPolicy": {"default": "81559Mi",
                                                                              "validRange": {"min": "1Mi", "max": "81559Mi", "step": "1Mi"}}}
    plain = yaml.safe_load(gpuc("inventory", fleet(clusters=[platform(pools=[dict(H100)])]), "--cluster", "c1").out)
    assert "allowMultipleAllocations" not in plain["items"][0]["spec"]["devices"][0]


def test_consumable_shares_demo_readme_matches_the_policies_gpuc_publishes():
    readme = (REFERENCE / "nvidia-dra-driver-gpu" / "main-0.5.0-dev" / "demo-specs" / "consumable-shares_README.md").read_text()
    assert "`default` equals\n  total GPU memory (rounded down to 1MiB), `min` is `1Mi`, and `step` is `1Mi`" in readme
    assert "`default` is `0`,\n  `min` is `0`, `step` is `1Mi`" in readme


# ------------------------------------------------------------------------------ capacity arithmetic

def _device(multi: bool = True, policy: RequestPolicy | None = None) -> Device:
    capacity = {"gpu.nvidia.com": {"memory": Quantity.parse("80Gi")}}
    return Device("gpu-0", "gpu.nvidia.com", {}, capacity, multi=multi,
                  policies={"gpu.nvidia.com": {"memory": policy}} if policy else None)


def _memory(text: str) -> tuple:
    return (("memory", Quantity.parse(text)),)


def test_consumption_follows_the_request_policy():
    mi = Quantity.parse("1Mi")
    ranged = _device(policy=RequestPolicy(default=Quantity.parse("80Gi"), minimum=Quantity.parse("1Gi"), step=Quantity.parse("1Gi")))
    key = ("gpu.nvidia.com", "memory")
    assert consumption(ranged, _memory("1500Mi")) == {key: 2 * 2**30}  # rounded up to the step from the minimum
    assert consumption(ranged, _memory("100Mi")) == {key: 2**30}  # below the minimum: the minimum
    assert consumption(ranged, ()) == {key: 80 * 2**30}  # no amount: the default, the whole GPU
    capped = _device(policy=RequestPolicy(minimum=mi, maximum=Quantity.parse("40Gi"), step=mi))
    assert consumption(capped, _memory("41Gi")) is None  # over the maximum
    values = _device(policy=RequestPolicy(valid_values=(Quantity.parse("10Gi"), Quantity.parse("40Gi"))))
    assert consumption(values, _memory("11Gi")) == {key: 40 * 2**30}
    assert consumption(_device(), _memory("3Gi")) == {key: 3 * 2**30}  # no policy: what is asked
    assert consumption(_device(), ()) == {key: 80 * 2**30}  # no policy, no amount: all of it
    assert consumption(_device(), (("shares", Quantity(1)),)) is None  # a capacity the device lacks
    exclusive = _device(multi=False)
    assert consumption(exclusive, _memory("90Gi")) is None and consumption(exclusive, _memory("20Gi")) == {}
    assert fits(ranged, {key: Fraction(40 * 2**30)}, {key: 40 * 2**30}) and not fits(ranged, {key: 1}, {key: 80 * 2**30})


def test_amounts_the_scheduler_cannot_compute_are_errors_not_misfits():
    """v0.37.2 aborts (an error, not "does not fit") on a negative amount and on int64 overflow in range rounding."""
    stepped = _device(policy=RequestPolicy(minimum=Quantity(2), maximum=Quantity(4), step=Quantity(2)))
    with pytest.raises(CapacityError, match='capacity "memory": capacity value is negative'):
        consumption(_device(multi=False), _memory("-5"))
    with pytest.raises(CapacityError, match="request 18446744073709551616 exceeds MaxInt64"):
        consumption(stepped, (("memory", Quantity(2**64)),))
    with pytest.raises(CapacityError, match="rounding request 9223372036854775807 up to the next step passes MaxInt64"):
        consumption(stepped, (("memory", Quantity(2**63 - 1)),))
    assert consumption(stepped, (("memory", Quantity(2**63 - 2)),)) is None  # rounds within int64; over the maximum
    assert consumption(_device(), (("memory", Quantity(2**64)),)) is None  # no range: no int64 arithmetic, too large


def test_exported_slices_with_consumable_capacity_are_read(fleet, tmp_path):
    path = fleet(clusters=[platform(pools=[dict(H100)])], workloads={"w.yaml": [workload_doc("f", "t", replicas=3, gpu={"sharing": "Fractional", "memory": "30Gi"})]})
    exported = tmp_path / "slices.yaml"
    exported.write_text(gpuc("inventory", path, "--cluster", "c1").out)
    plan = json.loads(gpuc("plan", path, "--slices", exported, "--output", "json").out)
    devices = [p["claims"][0]["devices"][0]["device"] for p in pods_of(plan, "f")]
    assert devices.count(devices[0]) == 2 and len(set(devices)) == 2  # two 30Gi on one 79.6 GiB GPU, the third elsewhere


# ------------------------------------------------------------------------------ extended resources

def _classes(compiled) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"] for o in objects_of(compiled, "DeviceClass")}


def test_opted_in_pools_serve_device_plugin_style_requests(fleet):
    pools = [dict(H100, extendedResource=True),
             {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-1g.10gb"}, "extendedResource": True},
             dict(H200)]
    path = fleet(clusters=[platform(kubernetes="1.37", pools=pools)])
    assert gpuc("validate", path).code == 0
    classes = _classes(compile_single(path))
    gpu = classes["gpu.extended-resources.gpuc.dev"]
    assert gpu["extendedResourceName"] == "nvidia.com/gpu"
    assert gpu["selectors"][-1]["cel"]["expression"] == "device.attributes['gpu.nvidia.com'].productName in ['NVIDIA H100 80GB HBM3']"
    assert classes["mig-1g.10gb.extended-resources.gpuc.dev"]["extendedResourceName"] == "nvidia.com/mig-1g.10gb"


def test_a_mixed_cluster_gets_a_guard_against_the_charts_nvidia_gpu_mapping(fleet):
    """The chart's gpu.nvidia.com class maps nvidia.com/gpu onto every DRA GPU (25.12+ on resource.k8s.io/v1):
    with device-plugin pools beside them and no pool opted in, gpuc's newer class maps it onto none."""
    template = (REFERENCE / "nvidia-dra-driver-gpu" / "v25.12.0" / "templates" / "deviceclass-gpu.yaml").read_text()
    assert "extendedResourceName: nvidia.com/gpu" in template
    legacy = {"name": "legacy", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"}
    path = fleet(clusters=[platform(kubernetes="1.36", pools=[dict(H100), legacy])])
    result = gpuc("validate", path)
    assert result.code == 0 and "extended-resources" not in result.err  # the guard matches nothing on purpose, quietly
    guard = _classes(compile_single(path))["gpu.extended-resources.gpuc.dev"]
    assert guard["extendedResourceName"] == "nvidia.com/gpu" and guard["selectors"][-1]["cel"]["expression"] == "false"
    assert "gpu.extended-resources.gpuc.dev" not in _classes(compile_single(fleet(clusters=[platform(kubernetes="1.36")])))
    old = compile_single(fleet(clusters=[platform(kubernetes="1.35", pools=[dict(H100), legacy])]))
    assert "gpu.extended-resources.gpuc.dev" not in _classes(old)  # the gate is off by default there: nothing to guard


@pytest.mark.parametrize("kubernetes, pools, fragments, code", [
    ("1.37", [dict(H100, extendedResource=True), dict(H100, name="other")], ["spec.nodePools[1].extendedResource", "same GPU model"], 2),
    ("1.37", [dict(H100), {"name": "dp", "nodes": 1, "gpu": {"model": "L4-24GB", "count": 1}, "allocation": "devicePlugin",
                           "extendedResource": True}], ["spec.nodePools[1].extendedResource", "serves nvidia.com/gpu itself"], 2),
    ("1.33", [dict(H100, extendedResource=True)], ["Kubernetes 1.33 does not have the DRAExtendedResource feature gate"], 2),
])
def test_bad_extended_resource_pools_name_the_field(fleet, kubernetes, pools, fragments, code):
    render_rejected(fleet(clusters=[platform(kubernetes=kubernetes, driver="25.12.0" if kubernetes == "1.33" else "0.5.1", pools=pools)]),
                    *fragments, code=code)


def test_extended_resources_on_135_warn_about_the_gate(fleet):
    result = gpuc("validate", fleet(clusters=[platform(kubernetes="1.35", pools=[dict(H100, extendedResource=True)])]))
    assert result.code == 0 and "DRAExtendedResource" in result.err and "alpha and off by default" in result.err
