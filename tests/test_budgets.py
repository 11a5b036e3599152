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
