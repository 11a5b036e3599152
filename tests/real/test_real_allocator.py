"""gpuc's allocator against Kubernetes' own (k8s.io/dynamic-resource-allocation/structured, built by
harness/build.sh): the same inventory, classes and claims, pod by pod in gpuc's placement order.

A gpuc plan is replayed (harness/replay.py): every pod gpuc places must be allocatable upstream on
the node gpuc chose, with the devices gpuc chose, and the nodes gpuc passed over must not fit it
upstream either; every pod gpuc cannot place must fit on no node upstream.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fleetgen import generate_plan
from compiler.diagnostics import InputError
from compiler.load.state import read_state
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place import running_inventory, synthesize_for
from harness.allocref import Allocref
from harness.replay import replay

from conftest import EXAMPLES, SLICES_FIXTURE, SLICES_FIXTURE_POOLS, cluster_doc, write_fleet


def _replayed(ref: Allocref, root: Path, check_skipped: bool = True) -> list[tuple[str, Any]]:
    fleet = compile_fleet(root, CompileOptions(detail=True, allow_infeasible=True))
    out = []
    for name, outcome in fleet.clusters.items():
        if outcome.compiled is None or outcome.placement is None:
            continue
        out.append((name, replay(ref, outcome.compiled, synthesize_for(outcome.compiled), outcome.placement, check_skipped=check_skipped)))
    return out


@pytest.mark.parametrize("cluster", ["prod-east", "staging", "lab", "west"])
def test_example_fleet_plans_as_kubernetes_allocates(allocref: Allocref, cluster: str) -> None:
    fleet = compile_fleet(EXAMPLES, CompileOptions(only=cluster, detail=True))
    outcome = fleet.clusters[cluster]
    result = replay(allocref, outcome.compiled, synthesize_for(outcome.compiled), outcome.placement, check_skipped=True)
    assert result.placed > 0
    assert result.differences == []


def test_a_generated_fleet_plans_as_kubernetes_allocates(allocref: Allocref, tmp_path: Path) -> None:
    """The allocator benchmark's mix (exclusive, NIM, MIG, shared, time-sliced, whole-node pods), 40 nodes, 200 pods,
    and enough pods that some cannot be placed."""
    generate_plan(tmp_path, nodes=40, pods=400, seed=11)
    [(name, result)] = _replayed(allocref, tmp_path, check_skipped=False)
    assert result.pods == 400 and 0 < result.placed < 400
    assert result.differences == []


def test_a_kubectl_export_with_running_claims_plans_as_kubernetes_allocates(allocref: Allocref, tmp_path: Path) -> None:
    """The cluster as it runs: a kubectl export's ResourceSlices, and claims gpuc does not manage holding GPUs."""
    import kubectl

    workloads = [{"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": f"w{i}", "namespace": "team"},
                  "spec": {"clusters": ["c1"], "replicas": replicas, "gpu": gpu}}
                 for i, (replicas, gpu) in enumerate([(3, {"count": 1}), (1, {"count": 2}), (2, {"mig": {"slices": [{"profile": "1g.10gb"}]}})])]
    root = write_fleet(tmp_path / "f", [cluster_doc(kubernetes="1.37", driver="0.5.1", pools=SLICES_FIXTURE_POOLS)], {"w.yaml": workloads})
    running = [kubectl.allocated_claim("train-a", "research", [("gpu.nvidia.com", "ip-10-0-1-17", f"gpu-{i}") for i in range(3)],
                                       node_name="ip-10-0-1-17", pod="train-a-0")]
    export = tmp_path / "state.yaml"
    export.write_text(SLICES_FIXTURE.read_text() + "---\n" + kubectl.yaml_export(running))
    state = read_state([str(export)])
    outcome = compile_fleet(root, CompileOptions(detail=True, allow_infeasible=True, state=state)).clusters["c1"]
    inventory, _ = running_inventory(outcome.compiled, state)
    result = replay(allocref, outcome.compiled, inventory, outcome.placement, check_skipped=True, running=running)
    assert outcome.placement.held and 0 < result.placed < result.pods
    assert result.differences == []


def test_the_replay_reports_a_plan_that_lies(allocref: Allocref) -> None:
    """The comparison is not vacuous: a plan that puts a pod on a node whose devices another pod holds is caught."""
    fleet = compile_fleet(EXAMPLES, CompileOptions(only="prod-east", detail=True))
    outcome = fleet.clusters["prod-east"]
    plan = outcome.placement
    placed = [p for p in plan.pods if p.node is not None and p.claims and p.claims[0].devices]
    first, second = placed[0], next(p for p in placed[1:] if p.node == placed[0].node and not p.claims[0].shared)
    forged_claims = (second.claims[0]._replace(devices=tuple(d._replace(device=first.claims[0].devices[0].device)
                                                              for d in second.claims[0].devices)),) + second.claims[1:]
    import dataclasses

    forged = dataclasses.replace(plan, pods=tuple(dataclasses.replace(p, claims=forged_claims) if p is second else p for p in plan.pods))
    result = replay(allocref, outcome.compiled, synthesize_for(outcome.compiled), forged)
    assert any(second.pod in d for d in result.differences)


PLATFORMS = [("1.32", "25.3.2"), ("1.33", "25.8.1"), ("1.34", "25.12.0"), ("1.36", "0.5.1"), ("1.37", "0.5.1")]


@st.composite
def scenarios(draw) -> tuple[dict, list[dict]]:
    """A cluster of one to three pools and a few workloads over what gpuc models: whole GPUs, counts,
    shared claims, MIG slices, alternatives and fractional memory where the platform has them."""
    kubernetes, driver = draw(st.sampled_from(PLATFORMS))
    modern = kubernetes >= "1.36"
    pools = [{"name": "h100", "nodes": draw(st.integers(1, 3)), "gpu": {"model": "H100-80GB", "count": draw(st.sampled_from([2, 4, 8]))}}]
    if draw(st.booleans()):
        pools.append({"name": "l40s", "nodes": draw(st.integers(1, 2)), "gpu": {"model": "L40S-48GB", "count": draw(st.sampled_from([1, 2, 4]))}})
    mig = draw(st.booleans())
    if mig:
        layout = draw(st.sampled_from(["all-balanced", "dynamic"] if modern else ["all-balanced"]))
        pools.append({"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 2}, "mig": {"layout": layout}})
    cluster = cluster_doc("c1", kubernetes=kubernetes, driver=driver, pools=pools,
                          acknowledge=[{"warning": "unchecked-crds", "reason": "generated"}])
    kinds = ["exclusive", "shared"] + ["mig"] * mig + ["alternatives"] * (kubernetes >= "1.34") + ["fractional"] * modern
    workloads = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(kinds))
        gpu: dict[str, Any]
        if kind == "mig":
            gpu = {"mig": {"slices": [{"profile": draw(st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb"]))}]}}
        elif kind == "alternatives":
            gpu = {"alternatives": [{"count": draw(st.sampled_from([1, 2, 4])), "require": {"productName": "NVIDIA L40S"}},
                                    {"count": draw(st.sampled_from([1, 2])), "require": {"architecture": ["Hopper"]}}]}
        elif kind == "fractional":
            gpu = {"sharing": "Fractional", "memory": draw(st.sampled_from(["10Gi", "16Gi", "40Gi"])), "require": {"architecture": ["Hopper"]}}
        elif kind == "shared":
            gpu = {"count": 1, "sharing": "Shared"}
        else:
            gpu = {"count": draw(st.sampled_from([1, 1, 2, 4, 8]))}
        workloads.append({"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": f"w{i}", "namespace": "team"},
                          "spec": {"clusters": ["c1"], "replicas": draw(st.integers(1, 5)), "gpu": gpu}})
    return cluster, workloads


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
          derandomize=True)
@given(scenarios())
def test_random_scenarios_plan_as_kubernetes_allocates(allocref: Allocref, scenario) -> None:
    cluster, workloads = scenario
    with tempfile.TemporaryDirectory() as tmp:
        root = write_fleet(Path(tmp) / "f", [cluster], {"w.yaml": workloads})
        try:
            replays = _replayed(allocref, root)
        except InputError:
            return  # an intent gpuc refuses (a model that does not fit, say) has no plan to compare
        for _, result in replays:
            assert result.differences == []

