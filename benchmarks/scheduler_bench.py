"""kube-scheduler binding a gpuc plan in the harness, timed (run by `benchmarks.run --only plan-vs-scheduler`).

    python -m benchmarks.scheduler_bench fleet DIR NODES PODS      # the generated fleet of tests/real/test_real_scheduler.py
    python -m benchmarks.scheduler_bench schedule FLEET WORK PLAN  # PLAN: `gpuc plan FLEET --output json` of that fleet

`schedule` starts a control plane of the harness's built components (kube-apiserver, kube-scheduler, the
claim controller; harness/build.sh builds them), publishes the cluster and gpuc's rendered tree, and hands the
scheduler every pod of the plan at once (harness/scheduling.py's schedule_batch). It prints JSON: the
verdicts' counts, every place where the scheduler's node differs from the node in PLAN, and the timing.
Needs PYTHONPATH to hold the repository and its tests/ (the setup is the real tests'). A missing component
exits 2 with the command that builds it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.components import ComponentMissing
from harness.controlplane import ControlPlane
from harness.servers import scheduling_plane


def fleet(root: Path, nodes: int, pods: int) -> None:
    from real.scheduler_run import generated_fleet

    generated_fleet(root, nodes=nodes, pods=pods)


def schedule(fleet_dir: Path, work: Path, plan_json: Path) -> dict:
    from real.scheduler_run import schedule as run

    planes: list[ControlPlane] = []

    def start(minor: str) -> ControlPlane:
        cp = scheduling_plane(minor, work / f"cp-{minor}")
        planes.append(cp)
        return cp

    try:
        verdicts, plan = run(start, fleet_dir, "gen", work, batch=True)
    finally:
        for cp in planes:
            cp.stop()
    cli = {p["pod"]: p["node"] for c in json.loads(plan_json.read_text())["clusters"] for p in c["pods"]}
    differences = list(verdicts.differences)
    for p in plan.pods:  # the plan timed by the benchmark is the CLI's: it must be the one the scheduler was given
        if cli.get(p.pod, "absent") != p.node:
            differences.append(f"{p.workload} pod {p.pod}: `gpuc plan` places it on {cli.get(p.pod, 'nothing')}, the harness's plan on {p.node}")
    timing = verdicts.timing
    assert timing is not None
    return {"pods": len(plan.pods), "placed": sum(1 for p in plan.pods if p.node is not None), "bound": len(verdicts.bound),
            "unschedulable": len(verdicts.unschedulable), "differences": differences, "created_s": timing.created_s,
            "released_s": timing.released_s, "last_bind_s": timing.last_bind_s, "last_verdict_s": timing.last_verdict_s,
            "scheduler_cpu_s": timing.scheduler_cpu_s}


def main(argv: list[str]) -> int:
    if argv[:1] == ["fleet"] and len(argv) == 4:
        fleet(Path(argv[1]), int(argv[2]), int(argv[3]))
        return 0
    if argv[:1] == ["schedule"] and len(argv) == 4:
        try:
            print(json.dumps(schedule(Path(argv[1]), Path(argv[2]), Path(argv[3]))))
        except ComponentMissing as exc:
            print(f"the harness's components are not built: {exc}", file=sys.stderr)
            return 2
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
