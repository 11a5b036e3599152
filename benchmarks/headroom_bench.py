"""The headroom search at scale (issue 37): `python -m benchmarks.headroom_bench [--work DIR] [--unplaceable N]`.

The plan benchmark's cluster (5,000 nodes, 20,000 pods, benchmarks/fleetgen.py, seed 7) plus one workload of
1-GPU Hopper pods that comes last in the placement order: it fills the H100s' free GPUs, and exactly N of its pods
are left over. Reports, from one process, the time to place every pod and the time of the headroom search on that
plan (allocator runs included), with the recommendation, so the two can be compared as a ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place import dra_values, place_cluster, synthesize_for
from compiler.place.allocator import cluster_pods, device_classes
from compiler.place.headroom import Search, headroom

from .fleetgen import generate_plan


def _overflow(fleet: Path, replicas: int) -> None:
    """`replicas` pods in workloads of at most 10,000 replicas (the intent's limit), placed last of the 1-GPU pods."""
    docs = [{"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": f"overflow-{i}", "namespace": "zz-overflow"},
             "spec": {"replicas": min(10000, replicas - start), "gpu": {"count": 1, "require": {"architecture": ["Hopper"]}}}}
            for i, start in enumerate(range(0, replicas, 10000))]
    (fleet / "workloads" / "zz-overflow.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False) if docs else "")


def _compiled(fleet: Path):
    outcome = compile_fleet(fleet, CompileOptions(keep=True, allow_infeasible=True)).clusters["big"]
    assert outcome.compiled is not None
    return outcome.compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--unplaceable", type=int, default=1000)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="gpuc-headroom-"))
    fleet = work / f"plan-{args.nodes}n-{args.pods}p-headroom"
    if not fleet.exists():
        generate_plan(fleet, args.nodes, args.pods, seed=7)
    (fleet / "workloads" / "zz-overflow.yaml").unlink(missing_ok=True)
    compiled = _compiled(fleet)
    base = place_cluster(compiled, synthesize_for(compiled))
    free = next(u.gpus - u.gpus_used for u in base.pools if u.pool == "h100")
    _overflow(fleet, free + args.unplaceable)
    compiled = _compiled(fleet)
    start = time.perf_counter()
    plan = place_cluster(compiled, synthesize_for(compiled))
    placed_s = time.perf_counter() - start
    runs = []
    original = Search.placed_on

    def counted(self, pool, n, pods):  # count the allocator runs of the search
        runs.append(n)
        return original(self, pool, n, pods)

    Search.placed_on = counted  # type: ignore[method-assign]
    start = time.perf_counter()
    values = dra_values(compiled)
    room = headroom(compiled.cluster, values, compiled.node_labels, device_classes(compiled, values), cluster_pods(compiled), plan)
    search_s = time.perf_counter() - start
    print(f"cluster: {plan.nodes} nodes, {len(plan.pods)} pods, {len(plan.unplaced)} cannot be placed")
    print(f"place every pod: {placed_s:.1f} s")
    print(f"headroom search: {search_s:.1f} s ({search_s / placed_s:.2f}x the placement), {len(runs)} allocator runs on added "
          f"nodes (sizes {runs}), plus the re-plan of the recommendation with the nodes in place")
    print(f"recommended: {[a.as_dict() for a in room.recommended]}, alternatives: {[a.as_dict() for a in room.options[1:]]}, "
          f"verified: {room.verified}, stuck: {len(room.stuck)}")


if __name__ == "__main__":
    main()
