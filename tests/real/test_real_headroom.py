"""Headroom against the real kube-scheduler (issue 37): a plan that says "add N nodes to pool X" fits with those
nodes added, and does not fit with one node fewer: on a control plane of the cluster with the pools grown, the
scheduler binds every pod where gpuc places it (harness/scheduling.py), and with one node fewer leaves exactly the
pods gpuc says cannot be placed unschedulable."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import cluster_doc, gpuc, workload_doc, write_fleet
from real.scheduler_run import schedule

POOLS = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}},
         {"name": "a100-mig", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-1g.10gb"}}]
WORKLOADS = [workload_doc("train", "team", replicas=5, gpu={"count": 4, "require": {"architecture": ["Hopper"]}}),
             workload_doc("nb", "team", replicas=60, gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": 1}]}})]


def _fleet(root: Path, added: dict[str, int], minor: str = "1.37") -> Path:
    pools = [{**p, "nodes": p["nodes"] + added.get(p["name"], 0)} for p in POOLS]
    return write_fleet(root, [cluster_doc("c1", kubernetes=minor, driver="0.5.1", pools=pools)], {"w.yaml": WORKLOADS})


def test_the_nodes_gpuc_says_to_add_place_every_pod_with_the_real_scheduler(fresh_plane, tmp_path: Path) -> None:
    plan = json.loads(gpuc("plan", _fleet(tmp_path / "before", {}), "--output", "json").out)
    room = plan["clusters"][0]["headroom"]
    added = {a["pool"]: a["nodes"] for a in room["recommended"]}
    # 5 pods of 4 GPUs on one 8-GPU node leave 3 over (2 nodes); 56 slices for 60 one-slice pods leave 4 (1 node)
    assert added == {"h100": 2, "a100-mig": 1}, room
    grown = _fleet(tmp_path / "grown", added)
    assert gpuc("plan", grown).code == 0
    verdicts, placement = schedule(fresh_plane, grown, "c1", tmp_path / "grown-run")
    assert placement.feasible and verdicts.differences == [] and verdicts.unschedulable == {}
    assert len(verdicts.bound) == 65
    assert {node for node in verdicts.bound.values()} >= {"h100-1", "h100-2", "a100-mig-1"}, "the added nodes are used"

    # a control plane of its own for the second cluster (fresh_plane keeps one per minor): 1.36, where the plan is the same
    fewer = _fleet(tmp_path / "fewer", {**added, "h100": added["h100"] - 1}, minor="1.36")
    verdicts, placement = schedule(fresh_plane, fewer, "c1", tmp_path / "fewer-run")
    assert not placement.feasible and verdicts.differences == []
    assert sorted(verdicts.unschedulable) == sorted(p.pod for p in placement.unplaced) and len(verdicts.unschedulable) == 1
    assert yaml.safe_load((fewer / "clusters" / "c1.yaml").read_text())["spec"]["nodePools"][0]["nodes"] == 2
