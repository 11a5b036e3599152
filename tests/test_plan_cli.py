"""The plan, inventory and render commands: exit codes, messages, output formats."""

from __future__ import annotations

import json

import kubernetes_validate
import yaml

from conftest import EXAMPLES, NIM_SECRETS, SLICES_FIXTURE_POOLS, cluster_doc, compile_single, gpuc, nim_model, workload_doc
from conftest import SLICES_FIXTURE as FIXTURE


def real_cluster(fleet, workloads=None):
    return fleet(clusters=[cluster_doc(pools=SLICES_FIXTURE_POOLS)], workloads=workloads or {})


def test_plan_on_exported_slices(fleet):
    workloads = {"w.yaml": [workload_doc("llm", replicas=2, gpu={"count": 2}),
                            workload_doc("notebook", gpu={"mig": {"slices": [{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]}})]}
    result = gpuc("plan", real_cluster(fleet, workloads), "--cluster", "c1", "--slices", FIXTURE)
    assert result.code == 0, result.out + result.err
    assert "inventory from " + str(FIXTURE) in result.out
    assert "team/llm       llm-0       ip-10-0-1-17  gpu: gpu-0, gpu-1" in result.out
    assert "team/llm       llm-1       ip-10-0-1-17  gpu: gpu-2, gpu-3" in result.out
    assert "ip-10-0-2-40  gpu: gpu-0-mig-3g40gb-9-4, gpu-0-mig-1g10gb-19-2, gpu-0-mig-1g10gb-19-3" in result.out
    assert "warning: items[3]: resource pool gpu.nvidia.com/ip-10-0-1-18 is incomplete" in result.err


def test_real_devices_that_do_not_match_what_the_intent_assumed(fleet):
    """The catalog assumes a recent host driver; the real nodes run 570, so the claim's selector matches nothing."""
    workloads = {"w.yaml": [workload_doc("llm", gpu={"count": 1, "require": {"minDriverVersion": "575.0"}})]}
    result = gpuc("plan", real_cluster(fleet, workloads), "--cluster", "c1", "--slices", FIXTURE, "--output", "json")
    assert result.code == 1
    report = json.loads(result.out)
    (pod,) = report["clusters"][0]["pods"]
    assert pod["node"] is None and not pod["error"]
    assert pod["reason"] == "request 'gpu' of llm: selector driverVersion >= 575.0.0 matched 0 of 6 devices; highest is 570.124.6"


def test_slices_need_one_cluster():
    result = gpuc("plan", "intents", "--slices", FIXTURE)
    assert result.code == 2 and "a cluster state describes one cluster" in result.err and "add --cluster" in result.err


def test_unreadable_slices_file(fleet, tmp_path):
    result = gpuc("plan", real_cluster(fleet), "--cluster", "c1", "--slices", tmp_path / "missing.yaml")
    assert result.code == 2 and "cannot read the cluster state" in result.err


def test_gpuc_inventory_prints_the_same_bytes_every_time():
    first = gpuc("inventory", EXAMPLES, "--cluster", "prod-east")
    second = gpuc("inventory", EXAMPLES, "--cluster", "prod-east")
    assert first.code == 0 and first.out == second.out
    listing = yaml.safe_load(first.out)
    assert len(listing["items"]) == 20
    assert listing["items"][0]["metadata"]["annotations"]["gpuc.dev/source"] == "synthesized by gpuc from clusters/prod-east.yaml#0"


def test_gpuc_inventory_needs_a_known_cluster():
    assert gpuc("inventory", EXAMPLES).code == 2
    result = gpuc("inventory", EXAMPLES, "--cluster", "prod-west")
    assert result.code == 2 and "no cluster named 'prod-west'" in result.err


def test_plan_of_the_example_fleet():
    result = gpuc("plan", EXAMPLES)
    assert result.code == 0, result.out + result.err
    assert "cluster prod-east: Kubernetes 1.34, DRA driver 25.12.0, synthesized inventory (10 nodes, 132 devices)" in result.out
    assert "  10 of 10 pods placed" in result.out
    assert "research/notebooks            notebooks-0         gpu-a100-0  gpu: gpu-0-mig-3g40gb-9-4, gpu-0-mig-1g10gb-19-2" in result.out
    assert "research/trainer              trainer-0-0         gb200-0     gpu: gpu-0, gpu-1, gpu-2, gpu-3; channel: channel-0" in result.out
    assert "  l40s-legacy    3      12    -            device plugin, not planned  -" in result.out
    assert gpuc("plan", EXAMPLES).out == result.out


def test_plan_json_for_ci():
    result = gpuc("plan", EXAMPLES, "--cluster", "prod-east", "--output", "json")
    assert result.code == 0
    report = json.loads(result.out)
    assert report["ok"] is True and [c["cluster"] for c in report["clusters"]] == ["prod-east"]
    cluster = report["clusters"][0]
    pods = {p["pod"]: p for p in cluster["pods"]}
    assert pods["llama-1b-guard-0"]["claims"][0]["shared"] is True
    assert pods["llama-1b-guard-0"]["claims"][0]["devices"] == pods["qwen-1-5b-router-0"]["claims"][0]["devices"]
    assert {p["pool"]: p["after"]["gpusUsed"] for p in cluster["pools"]} == {"h100": 8, "a100-mig": 2, "gb200": 8}


def _crowded(fleet):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}]
    workloads = {"w.yaml": [workload_doc("llm", replicas=3, gpu={"count": 4})]}
    return fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads)


def test_plan_exits_1_and_says_why(fleet):
    result = gpuc("plan", _crowded(fleet))
    assert result.code == 1
    assert "  2 of 3 pods placed, 1 cannot be placed" in result.out
    assert ("    team/llm llm-2: request 'gpu' of llm needs 4 free devices on one node: 8 match, 8 are allocated (8 by earlier pods of team/llm), "
            "at most 0 free on one node") in result.out
    report = json.loads(gpuc("plan", _crowded(fleet), "--output", "json").out)
    assert report["ok"] is False and report["clusters"][0]["feasible"] is False


def _gated(fleet, h200_nodes: int, workloads: list):
    """driver 0.5.1 with one dynamic-MIG H100 pool (the DynamicMIG gate on) and a whole-GPU H200 pool beside it."""
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 1}, "mig": {"layout": "dynamic"}},
             {"name": "h200", "nodes": h200_nodes, "gpu": {"model": "H200-141GB", "count": 8}}]
    return fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)], workloads={"w.yaml": workloads})


H200_SLICES = workload_doc("slices", gpu={"mig": {"slices": [{"profile": "3g.71gb", "count": 2}], "sameGpu": True}})
H200_WHOLE = workload_doc("whole", gpu={"count": 8, "require": {"productName": "NVIDIA H200"}})


def test_the_plan_places_mig_slices_on_the_hopper_gpus_the_gate_partitions(fleet):
    """Held-out review (issue 45): with the gate on for one pool the plugin publishes MIG partitions on every Hopper
    GPU of the cluster (facts dynamicMig); gpuc refused an H200 slice the real cluster would place."""
    result = gpuc("plan", _gated(fleet, 1, [H200_SLICES]), "--output", "json")
    assert result.code == 0, result.err + result.out
    (pod,) = json.loads(result.out)["clusters"][0]["pods"]
    assert pod["node"] == "h200-0"
    assert sorted(d["device"] for d in pod["claims"][0]["devices"]) == ["gpu-0-mig-3g71gb-9-0", "gpu-0-mig-3g71gb-9-4"]
    # the full GPU and its partitions share one counter set: on one node, the slices leave 7 of 8 whole H200s
    crowded = gpuc("plan", _gated(fleet, 1, [H200_SLICES, H200_WHOLE]))
    assert crowded.code == 1 and "1 cannot be placed" in crowded.out, crowded.out
    assert gpuc("plan", _gated(fleet, 2, [H200_SLICES, H200_WHOLE])).code == 0


def test_a_whole_gpu_claim_is_not_planned_on_an_ampere_pool_in_mig_mode(fleet):
    """From 0.4 an Ampere GPU the gate partitions (in MIG mode: the pool asks for dynamic MIG) has no full-GPU device
    (nvlib.go: `if !gpuInfo.migEnabled || supportsMIGModeToggle(d)`); 25.12 publishes it."""
    pools = [{"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}]
    whole = {"w.yaml": [workload_doc("whole", gpu={"count": 1})]}
    ack = [{"warning": "mig-mode", "reason": "the node image enables MIG mode"}, {"warning": "driver-upgrade", "reason": "drained"}]
    result = gpuc("plan", fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools, acknowledge=ack)], workloads=whole))
    assert result.code == 1 and "its Ampere GPUs are in MIG mode for dynamic MIG, and driver 0.5.1 publishes no full GPU" in result.err, result.err
    assert gpuc("plan", fleet(clusters=[cluster_doc(kubernetes="1.36", driver="25.12.0", pools=pools, acknowledge=ack)], workloads=whole)).code == 0


def test_selectors_and_sizing_read_the_memory_a_partitioned_gpu_publishes(fleet):
    """With DynamicMIG the full GPU publishes its largest profile's memory (H100: 81152Mi of 81559Mi;
    ../shared/reference/hardware/h100-80gb-hbm3): a floor between the two matched an ungated H100 and none gated."""
    floor = workload_doc("floor", gpu={"count": 1, "require": {"minMemory": "81200Mi"}})
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}]
    assert gpuc("plan", fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)],
                              workloads={"w.yaml": [floor]})).code == 0
    gated = cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools, draDriver={"version": "0.5.1", "values": {"featureGates": {"DynamicMIG": True}}})
    result = gpuc("plan", fleet(clusters=[gated], workloads={"w.yaml": [floor]}))
    assert result.code == 1 and "(h100: memory is 79.2Gi < 81200Mi)" in result.err, result.err
    compiled = compile_single(fleet(clusters=[gated], workloads={"w.yaml": [workload_doc("nim", model=nim_model(), secrets=NIM_SECRETS)]}))
    (plan,) = compiled.plan.workloads
    assert [c[1] for c in plan.sizing.candidates] == [81152 * 2**20]  # what sizing divides the model by


def test_plan_reports_say_what_a_fit_promises(fleet):
    text = gpuc("plan", _crowded(fleet)).out
    assert "note: gpuc places pods largest and most constrained first" in text and '"fits" holds for that order' in text
    assert "the real scheduler may pick a different but equivalent device or node" in text
    cluster = json.loads(gpuc("plan", _crowded(fleet), "--output", "json").out)["clusters"][0]
    assert cluster["placement"]["podOrder"] == "largest-and-most-constrained-first"
    assert any("different but equivalent device" in n for n in cluster["placement"]["notes"])


def test_render_refuses_an_infeasible_plan(fleet, tmp_path):
    out = tmp_path / "rendered"
    result = gpuc("render", _crowded(fleet), "-o", out)
    assert result.code == 1 and not out.exists()
    assert "workloads/w.yaml:" in result.err and "pod llm-2 of team/llm cannot be placed on cluster 'c1'" in result.err
    assert "--allow-infeasible" in result.err and "nothing was written" in result.err
    allowed = gpuc("render", _crowded(fleet), "-o", out, "--allow-infeasible")
    assert allowed.code == 0 and (out / "c1" / "kustomization.yaml").is_file()
    assert "warning: spec.gpu: pod llm-2 of team/llm cannot be placed" in allowed.err


def test_validate_refuses_an_infeasible_plan_like_render(fleet):
    result = gpuc("validate", _crowded(fleet))
    assert result.code == 1 and "ok:" not in result.out
    assert "workloads/w.yaml:" in result.err and "pod llm-2 of team/llm cannot be placed on cluster 'c1'" in result.err
    assert "1 pod(s) cannot be placed on the clusters' inventories, so `gpuc render` would refuse this fleet" in result.err
    report = json.loads(gpuc("validate", _crowded(fleet), "--output", "json").out)
    assert report["ok"] is False and report["exitCode"] == 1
    assert any("cannot be placed on cluster 'c1'" in d["message"] for d in report["diagnostics"])


def test_render_of_a_feasible_fleet_still_writes(tmp_path):
    result = gpuc("render", EXAMPLES, "-o", tmp_path / "out")
    assert result.code == 0 and (tmp_path / "out" / "prod-east" / "kustomization.yaml").is_file()


def test_inventory_items_validate_against_the_cluster_version():
    listing = yaml.safe_load(gpuc("inventory", EXAMPLES, "--cluster", "staging").out)
    for item in listing["items"]:
        kubernetes_validate.validate(item, "1.34.0", strict=True)
    assert json.loads(gpuc("inventory", EXAMPLES, "--cluster", "staging", "--output", "json").out) == listing


def test_help_lists_the_new_commands():
    result = gpuc("--help")
    assert result.code == 0 and "plan" in result.out and "inventory" in result.out


def test_a_selector_no_device_meets_names_the_largest_value(fleet):
    pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}]
    memory = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"
    workloads = {"w.yaml": [workload_doc("llama-70b", gpu={"count": 4, "require": {"cel": [memory]}})]}
    result = gpuc("plan", fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads), "--output", "json")
    assert result.code == 1
    (pod,) = json.loads(result.out)["clusters"][0]["pods"]
    assert pod["reason"] == "request 'gpu' of llama-70b: selector memory >= 100Gi matched 0 of 16 devices; largest is 79.6Gi"


def test_the_html_report_is_readable_like_any_file_the_user_writes(fleet, tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        result = gpuc("plan", fleet(), "--html", tmp_path / "report.html")
    finally:
        os.umask(old)
    assert result.code == 0, result.err
    assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o644
