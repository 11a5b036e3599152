"""Team budgets (issue 37): the intent, its validation, the ResourceQuota it compiles to, and the refusal of a fleet
whose workloads claim more than a budget, counted as the API server's quota admission counts (tests/real/
test_real_budgets.py proves the counting against the real evaluator of every minor)."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.check.budgets import CLAIMS, claim_charge, namespace_charges
from compiler.place.allocator import ClaimSpec, Option, Pod, PodClaim, Request
from compiler.place.allocator.requests import ALL, EXACT_COUNT

from conftest import cluster_doc, compile_single, gpuc, objects_of, workload_doc


def _option(cls: str, count: int = 1, mode: str = EXACT_COUNT, admin: bool = False, name: str = "gpu") -> Option:
    return Option(name, cls, (), mode, count if mode == EXACT_COUNT else 0, admin)


@pytest.mark.parametrize(("case", "requests", "want"), [
    ("one request of 2", [Request("gpu", (_option("gpu.nvidia.com", 2),))], {"gpu.nvidia.com": 2}),
    ("two requests, two classes", [Request("a", (_option("gpu.nvidia.com", 1),)), Request("b", (_option("mig.nvidia.com", 3),))],
     {"gpu.nvidia.com": 1, "mig.nvidia.com": 3}),
    ("allocationMode All: the worst case", [Request("gpu", (_option("gpu.nvidia.com", mode=ALL),))], {"gpu.nvidia.com": 32}),
    ("adminAccess is charged", [Request("gpu", (_option("gpu.nvidia.com", 1, admin=True),))], {"gpu.nvidia.com": 1}),
    ("firstAvailable: the largest alternative", [Request("gpu", (_option("gpu.nvidia.com", 1), _option("gpu.nvidia.com", 4)))],
     {"gpu.nvidia.com": 4}),
    ("firstAvailable over two classes charges both", [Request("gpu", (_option("gpu.nvidia.com", 2), _option("mig.nvidia.com", 3)))],
     {"gpu.nvidia.com": 2, "mig.nvidia.com": 3}),
])
def test_claim_charge_follows_the_quota_evaluator(case: str, requests: Any, want: dict[str, int]) -> None:
    assert claim_charge(ClaimSpec(tuple(requests))) == want


def _pod(workload: str, name: str, key: str, shared: bool, count: int) -> Pod:
    spec = ClaimSpec((Request("gpu", (_option("gpu.nvidia.com", count),)),))
    return Pod(workload, name, 0, 0, (PodClaim(key, "gpu", "x", spec, shared),), None)  # type: ignore[arg-type]


def test_a_template_is_charged_per_pod_and_a_shared_claim_once() -> None:
    pods = [_pod("team/a", "a-0", "team/a-0-gpu", False, 2), _pod("team/a", "a-1", "team/a-1-gpu", False, 2),
            _pod("team/s", "s-0", "team/shared", True, 1), _pod("team/s", "s-1", "team/shared", True, 1),
            _pod("other/b", "b-0", "other/b-0-gpu", False, 8)]
    charges = namespace_charges(pods)
    assert charges["team"].total == {CLAIMS: 3, "gpu.nvidia.com": 5}
    assert charges["team"].by_workload == {"team/a": {CLAIMS: 2, "gpu.nvidia.com": 4}, "team/s": {CLAIMS: 1, "gpu.nvidia.com": 1}}
    assert charges["other"].total == {CLAIMS: 1, "gpu.nvidia.com": 8}


def _fleet(fleet, budgets: list[dict], **workload: Any):
    cluster = cluster_doc(budgets=budgets)
    return fleet([cluster], {"team.yaml": [workload_doc("train", "team", **(workload or {"replicas": 3, "gpu": {"count": 2}}))]})


def test_a_budget_compiles_to_a_resource_quota_with_the_dra_keys(fleet) -> None:
    path = _fleet(fleet, [{"namespace": "team", "devices": {"gpu.nvidia.com": 6}, "claims": 3},
                          {"namespace": "idle-team", "claims": 0}])
    compiled = compile_single(path)
    quotas = {q["metadata"]["namespace"]: q["spec"]["hard"] for q in objects_of(compiled, "ResourceQuota")}
    assert quotas == {"team": {"count/resourceclaims.resource.k8s.io": "3", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "6"},
                      "idle-team": {"count/resourceclaims.resource.k8s.io": "0"}}
    # the namespace of a budget no workload uses yet exists for its quota
    assert {"team", "idle-team"} <= {n["metadata"]["name"] for n in objects_of(compiled, "Namespace")}


@pytest.mark.parametrize(("budget", "message"), [
    ({"devices": {"gpu.nvidia.com": 5}}, "would claim 6 devices of DeviceClass gpu.nvidia.com against a budget of 5 (team/train 6)"),
    ({"claims": 2}, "would claim 3 ResourceClaims against a budget of 2 (team/train 3)"),
])
def test_plan_and_render_refuse_workloads_over_a_budget_with_the_numbers(fleet, tmp_path, budget: dict, message: str) -> None:
    path = _fleet(fleet, [{"namespace": "team", **budget}])
    for args in (("plan", path), ("render", path, "-o", tmp_path / "out")):
        result = gpuc(*args)
        assert result.code == 1, result.err
        assert message in result.err and "clusters/c1.yaml:" in result.err, result.err
        assert "hint: raise this budget by 1" in result.err
    assert not (tmp_path / "out" / "c1").exists()


def test_a_budget_within_reach_passes(fleet) -> None:
    assert gpuc("plan", _fleet(fleet, [{"namespace": "team", "devices": {"gpu.nvidia.com": 6}, "claims": 3}])).code == 0


@pytest.mark.parametrize(("budgets", "path", "message"), [
    ([{"namespace": "team", "devices": {"gpu.nvidai.com": 2}}], "spec.budgets[0].devices.gpu.nvidai.com",
     "no DeviceClass 'gpu.nvidai.com' on cluster 'c1'"),
    ([{"namespace": "team", "claims": 1}, {"namespace": "team", "claims": 2}], "spec.budgets[1].namespace",
     "namespace 'team' has a budget already"),
    ([{"namespace": "team"}], "spec.budgets[0]", "a budget limits something"),
    ([{"namespace": "team", "devices": {"gpu.nvidia.com": -1}}], "spec.budgets[0].devices.gpu.nvidia.com", "greater than or equal to 0"),
    ([{"namespace": "team", "gpus": 2}], "spec.budgets[0].gpus", "unknown field 'gpus'"),
])
def test_bad_budgets_are_input_errors_at_their_line(fleet, budgets: list[dict], path: str, message: str) -> None:
    result = gpuc("validate", _fleet(fleet, budgets))
    assert result.code == 2, result.err
    assert "clusters/c1.yaml:" in result.err and path in result.err and message in result.err, result.err
    assert "Traceback" not in result.err


# ------------------------------------------------------------------------------ every class that selects the devices

HOPPER = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "hopper-80g.gpuc.dev"},
          "spec": {"require": {"architecture": ["Hopper"], "minMemory": "79Gi"}}}
QUOTA_KEY = "{}.deviceclass.resource.k8s.io/devices"


def test_the_example_budget_holds_the_other_gpu_class_at_zero() -> None:
    """prod-east budgets research on gpu.nvidia.com and mig.nvidia.com; the platform team's hopper-80g.gpuc.dev selects the
    same GPUs, so its quota holds it at 0: no class name escapes the budget (the channel classes select no GPU)."""
    from check_support import example_cluster

    (quota,) = objects_of(example_cluster("prod-east"), "ResourceQuota")
    assert quota["spec"]["hard"] == {"count/resourceclaims.resource.k8s.io": "10", QUOTA_KEY.format("gpu.nvidia.com"): "12",
                                     QUOTA_KEY.format("hopper-80g.gpuc.dev"): "0", QUOTA_KEY.format("mig.nvidia.com"): "8"}


def test_a_claim_through_a_class_the_budget_does_not_list_is_refused(fleet, monkeypatch) -> None:
    """The held-out review's case: a budget of 8 on gpu.nvidia.com, and 16 GPUs claimed through hopper-80g.gpuc.dev."""
    budgets = [{"namespace": "team", "devices": {"gpu.nvidia.com": 8}}]
    workload = workload_doc("train", "team", replicas=4, gpu={"count": 4, "class": "hopper-80g.gpuc.dev"})
    root = fleet([cluster_doc(budgets=budgets)], {"team.yaml": [HOPPER, workload]})
    monkeypatch.chdir(root)
    refused = gpuc("validate", ".")
    assert refused.code == 1
    assert refused.err.startswith("clusters/c1.yaml:28: error: spec.budgets[0].devices: namespace 'team' on cluster 'c1' would claim "
                                  "16 devices of DeviceClass hopper-80g.gpuc.dev (team/train 16), which the budget does not list"), refused.err
    assert "hint: add `hopper-80g.gpuc.dev: 16` to spec.budgets[0].devices" in refused.err
    listed = [{"namespace": "team", "devices": {"gpu.nvidia.com": 8, "hopper-80g.gpuc.dev": 8}}]
    over = gpuc("validate", fleet([cluster_doc(budgets=listed)], {"team.yaml": [HOPPER, workload]}))
    assert over.code == 1 and "would claim 16 devices of DeviceClass hopper-80g.gpuc.dev against a budget of 8" in over.err
    workload["spec"]["replicas"] = 2
    path = fleet([cluster_doc(budgets=listed)], {"team.yaml": [HOPPER, workload]})
    assert gpuc("validate", path).code == 0
    (quota,) = objects_of(compile_single(path), "ResourceQuota")
    assert quota["spec"]["hard"] == {QUOTA_KEY.format("gpu.nvidia.com"): "8", QUOTA_KEY.format("hopper-80g.gpuc.dev"): "8"}


def test_the_extended_resource_class_is_budgeted_and_mig_slices_are_their_own_type(fleet) -> None:
    """Pods asking for nvidia.com/gpu claim through gpuc's extended-resource class: held at 0 beside gpu.nvidia.com. MIG slices
    are devices of another type, budgeted by the classes that select them."""
    pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "extendedResource": True},
             {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-1g.10gb"}, "extendedResource": True}]
    budgets = [{"namespace": "team", "devices": {"gpu.nvidia.com": 8}}, {"namespace": "slices", "devices": {"mig.nvidia.com": 4}}]
    path = fleet([cluster_doc(kubernetes="1.37", pools=pools, budgets=budgets)],
                 {"team.yaml": [workload_doc("train", "team", gpu={"count": 1}), workload_doc("nb", "slices", gpu={"mig": {"slices": [{"profile": "1g.10gb"}]}})]})
    quotas = {q["metadata"]["namespace"]: q["spec"]["hard"] for q in objects_of(compile_single(path), "ResourceQuota")}
    assert quotas["team"] == {QUOTA_KEY.format("gpu.extended-resources.gpuc.dev"): "0", QUOTA_KEY.format("gpu.nvidia.com"): "8"}
    assert quotas["slices"] == {QUOTA_KEY.format("mig-1g.10gb.extended-resources.gpuc.dev"): "0", QUOTA_KEY.format("mig.nvidia.com"): "4"}


def test_plan_shows_each_teams_budget_used_limit_and_left_in_every_output(tmp_path) -> None:
    from conftest import EXAMPLES

    text = gpuc("plan", EXAMPLES, "--cluster", "prod-east", "--html", tmp_path / "report.html")
    assert text.code == 0, text.err
    table = text.out.split("team budgets (a ResourceQuota per namespace: the API server refuses the claim that goes over):\n")[1]
    assert table.startswith("    NAMESPACE  LIMIT ON                     USED  LIMIT  LEFT\n"
                            "    research   ResourceClaims               7     10     3\n"
                            "    research   gpu.nvidia.com devices       9     12     3\n"
                            "    research   mig.nvidia.com devices       6     8      2\n"
                            "    research   hopper-80g.gpuc.dev devices  0     0      0     not listed: held at 0 beside gpu.nvidia.com\n"), table
    import json

    (cluster,) = json.loads(gpuc("plan", EXAMPLES, "--cluster", "prod-east", "--output", "json").out)["clusters"]
    assert cluster["budgets"][1] == {"namespace": "research", "counts": "devices", "deviceClass": "gpu.nvidia.com", "used": 9,
                                     "limit": 12, "left": 3, "over": False}
    page = (tmp_path / "report.html").read_text()
    assert "<h3>Team budgets</h3>" in page and "<tr><td>research</td><td>gpu.nvidia.com devices</td><td>9</td><td>12</td><td>3</td>" in page
