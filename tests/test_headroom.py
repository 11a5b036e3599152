"""Headroom (issue 37): the smallest addition of nodes per pool that places the pods a plan cannot, found by the
allocator itself, and what each pool has left. The search is table-tested on its own (doubling then bisection),
then on real plans: the minimal addition, ties and alternatives across pools, MIG pools, shared capacity, pools
combined when no one pool holds every pod, and the answer checked by planning again with the nodes in place."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place.headroom import Addition, Headroom, smallest

from conftest import cluster_doc, gpuc, workload_doc

H100 = {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}
H100_4 = {"name": "h100-small", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 4}}
A100_MIG = {"name": "a100-mig", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-1g.10gb"}}


@pytest.mark.parametrize(("case", "need", "want", "upper", "found", "max_calls"), [
    ("nothing pending", 5, 0, 10, 0, 0),
    ("one node", 1, 3, 10, 1, 1),
    ("a power of two", 4, 3, 10, 4, 4),  # 1, 2, 4, then 3
    ("between two powers", 5, 3, 10, 5, 6),  # 1, 2, 4, 8, then 6 and 5
    ("at the upper bound", 10, 3, 10, 10, 6),
    ("never enough", 11, 3, 10, None, 5),
    ("large", 700, 3, 1000, 700, 20),
])
def test_smallest_doubles_then_bisects(case: str, need: int, want: int, upper: int, found: int | None, max_calls: int) -> None:
    calls: list[int] = []

    def placed(n: int) -> int:  # a pool where `need` added nodes place all `want` pods
        calls.append(n)
        return want if n >= need else 0

    assert smallest(placed, want if case != "nothing pending" else 0, upper) == found
    assert len(calls) <= max_calls, calls
    if found:  # the answer was tried, and so was the one below it (or it is 1): it is the smallest
        assert found in calls and (found == 1 or found - 1 in calls)


def _headroom(fleet, pools: list[dict], workloads: list[dict], **cluster: Any) -> Headroom:
    path = fleet([cluster_doc(pools=pools, **cluster)], {"w.yaml": workloads})
    outcome = compile_fleet(path, CompileOptions(detail=True, allow_infeasible=True)).clusters["c1"]
    assert outcome.placement is not None and outcome.placement.headroom is not None, outcome.infeasible + outcome.rejected
    return outcome.placement.headroom


def test_the_smallest_addition_that_places_every_pod(fleet) -> None:
    # 5 pods of 4 GPUs on one 8-GPU node: 3 do not fit, 2 nodes hold them (1 would hold only 2)
    room = _headroom(fleet, [dict(H100)], [workload_doc("train", "team", replicas=5, gpu={"count": 4})])
    assert room.pending == 3 and room.verified and room.stuck == ()
    assert room.recommended == (Addition("h100", 2, 16),)
    assert room.free[0].gpus == 0


def test_ties_and_alternatives_across_pools(fleet) -> None:
    # two more 4-GPU pods: one 8-GPU node or two 4-GPU nodes, 8 GPUs either way; the fewer nodes win the tie
    room = _headroom(fleet, [dict(H100), dict(H100_4)], [workload_doc("train", "team", replicas=5, gpu={"count": 4})])
    assert room.options == (Addition("h100", 1, 8), Addition("h100-small", 2, 8))
    # equal pools: pool order decides, the other is listed as the alternative
    twin = {**H100, "name": "h100-b"}
    room = _headroom(fleet, [dict(H100), twin], [workload_doc("train", "team", replicas=6, gpu={"count": 4})])
    assert room.options == (Addition("h100", 1, 8), Addition("h100-b", 1, 8))


def test_mig_slices_are_added_only_where_the_profile_exists(fleet) -> None:
    # 8 GPUs x 7 1g.10gb slices = 56; 60 one-slice pods leave 4 for one more MIG node, none on the H100s
    workloads = [workload_doc("nb", "team", replicas=60, gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": 1}]}})]
    room = _headroom(fleet, [dict(H100), dict(A100_MIG)], workloads)
    assert room.options == (Addition("a100-mig", 1, 8),)
    mig = next(f for f in room.free if f.pool == "a100-mig")
    assert mig.mig and mig.devices == 0 and mig.gpus == 0
    assert next(f for f in room.free if f.pool == "h100").gpus == 8


def test_pools_are_combined_when_no_one_pool_holds_every_pod(fleet) -> None:
    workloads = [workload_doc("nb", "team", replicas=60, gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": 1}]}}),
                 workload_doc("train", "team", replicas=3, gpu={"count": 8, "require": {"architecture": ["Hopper"]}})]
    room = _headroom(fleet, [dict(H100), dict(A100_MIG)], workloads)
    assert room.options == ()
    assert sorted(room.combined, key=lambda a: a.pool) == [Addition("a100-mig", 1, 8), Addition("h100", 2, 16)]
    assert room.verified


@pytest.mark.parametrize(("case", "pools", "options"), [
    # first-fit with 3 small nodes in place puts one 3-GPU pod on each 4-GPU node, and a 2-GPU pod is left over:
    # raised to 4 nodes, the small pool then costs as many GPUs as 2 big nodes, and more nodes, so it falls behind
    ("the small pool first: raised, then passed", [H100_4, H100], (Addition("h100", 2, 16), Addition("h100-small", 4, 16))),
    ("the big pool first: the search's answer fits", [H100, H100_4], (Addition("h100-small", 3, 12), Addition("h100", 2, 16))),
])
def test_the_answer_is_planned_again_with_every_pod(fleet, case: str, pools: list[dict], options: tuple[Addition, ...]) -> None:
    """The search places only the pending pods after every node; `gpuc plan` after the change places every pod from
    scratch, where the pool order can pack them worse: the recommendation must fit that plan, not the search's."""
    workloads = [workload_doc("small", "team", replicas=5, gpu={"count": 2}), workload_doc("big", "team", replicas=4, gpu={"count": 3})]
    room = _headroom(fleet, [dict(p) for p in pools], workloads)
    assert room.options == options and room.verified


def test_shareable_memory_left_on_fractional_gpus(fleet) -> None:
    workloads = [workload_doc("frac", "team", replicas=3, gpu={"sharing": "Fractional", "memory": "16Gi"})]
    room = _headroom(fleet, [dict(H100)], workloads, kubernetes="1.36", driver="0.5.1")
    (h100,) = room.free
    assert h100.gpus == 7  # the three fractions share one GPU
    assert h100.shareable.endswith("Gi") and int(h100.shareable[:-2]) < 8 * 80 - 48


def test_a_feasible_plan_adds_nothing_and_says_what_is_left(fleet) -> None:
    room = _headroom(fleet, [dict(H100)], [workload_doc("train", "team", replicas=1, gpu={"count": 4})])
    assert room.recommended == () and room.pending == 0 and room.free[0].gpus == 4


def test_plan_prints_the_addition_in_text_and_json(fleet) -> None:
    path = fleet([cluster_doc(pools=[dict(H100)])], {"w.yaml": [workload_doc("train", "team", replicas=5, gpu={"count": 4})]})
    text = gpuc("plan", path)
    assert text.code == 1
    assert "to place the 3 pod(s) that do not fit, add 2 nodes to pool h100 (16 GPUs)" in text.out
    data = __import__("json").loads(gpuc("plan", path, "--output", "json").out)
    assert data["clusters"][0]["headroom"]["recommended"] == [{"pool": "h100", "nodes": 2, "gpus": 16}]


def test_pods_the_scheduler_would_refuse_are_named_not_searched(fleet) -> None:
    bad = workload_doc("bad", "team", gpu={"count": 1, "require": {"cel": ["device.attributes['gpu.nvidia.com'].noSuchAttribute == 1"]}})
    room = _headroom(fleet, [dict(H100)], [bad])
    assert room.pending == 0 and room.recommended == ()
    assert [pod for pod, _ in room.stuck] == ["bad-0"] and "scheduler would report an error" in room.stuck[0][1]
