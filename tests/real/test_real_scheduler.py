"""gpuc's plans against the real kube-scheduler (DRA on, the resource-claim controller running): every
pod gpuc places is bound by the scheduler to the node gpuc chose, and every pod gpuc says cannot be
placed stays unschedulable (harness/scheduling.py has the method).

Each case gets a control plane of its own (no Nodes or claims shared between cases). The scheduler
and the claim controller are built at 1.37, which emulates back to 1.34: clusters of 1.32 and 1.33
are covered by the allocator replay and by their own minors' API servers, not by a scheduler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES
from real.scheduler_run import foreign_claim, generated_fleet, schedule


@pytest.mark.parametrize("cluster", ["prod-east", "staging", "lab", "west"])
def test_the_scheduler_binds_the_example_fleets_pods_where_gpuc_places_them(fresh_plane, tmp_path: Path, cluster: str) -> None:
    verdicts, plan = schedule(fresh_plane, EXAMPLES, cluster, tmp_path)
    placed = [p for p in plan.pods if p.node is not None]
    assert placed and verdicts.differences == []
    assert len(verdicts.bound) == len(placed)


def test_the_scheduler_binds_exactly_the_pods_gpuc_places_in_a_200_node_fleet(fresh_plane, tmp_path: Path) -> None:
    fleet = generated_fleet(tmp_path / "fleet")
    verdicts, plan = schedule(fresh_plane, fleet, "gen", tmp_path, foreign=foreign_claim("h100-0"))
    placed = [p for p in plan.pods if p.node is not None]
    assert len(plan.pods) == 1000 and 0 < len(placed) < 1000
    assert plan.held, "gpuc's plan did not see the running foreign claim"
    assert verdicts.differences == []
    assert len(verdicts.bound) == len(placed) and len(verdicts.unschedulable) == 1000 - len(placed)


def test_a_batch_of_every_pod_at_once_is_bound_exactly_where_gpuc_places_it(fresh_plane, tmp_path: Path) -> None:
    """The plan-vs-scheduler benchmark's mode: the scheduler gets the whole plan at once (released in gpuc's
    order) and works through its queue; the placements must still be gpuc's, pod for pod."""
    fleet = generated_fleet(tmp_path / "fleet", nodes=10, pods=100)
    verdicts, plan = schedule(fresh_plane, fleet, "gen", tmp_path, batch=True)
    placed = [p for p in plan.pods if p.node is not None]
    assert len(plan.pods) == 100 and 0 < len(placed) < 100
    assert verdicts.differences == []
    assert verdicts.bound == {p.pod: p.node for p in placed} and len(verdicts.unschedulable) == 100 - len(placed)
    assert verdicts.timing is not None and 0 < verdicts.timing.last_bind_s <= verdicts.timing.last_verdict_s
