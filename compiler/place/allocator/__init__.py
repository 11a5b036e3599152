"""Offline DRA allocation with the semantics of the Kubernetes 1.34 structured allocator (issue #4).

`plan_cluster_allocation(compiled, inventory)` places every pod of a compiled cluster on an
inventory (synthesized or loaded) and returns an AllocationPlan: placements, per-pool use, and an
actionable reason for each pod that cannot be placed. State (state.py) and search (search.py) are
separate, as in k8s.io/dynamic-resource-allocation/structured.
"""

from __future__ import annotations

from typing import Callable

from pathlib import Path

from ..inventory import Inventory, synthesize_for
from ..inventory.bulk import bulk_objects
from ..inventory.load import load_slices
from .planner import Progress, plan_pods, placement_order
from .pods import Pod, PodClaim, channel_claim_spec, cluster_pods, device_classes
from .requests import ClaimError, ClaimSpec, Constraint, DeviceClass, Option, Request, parse_claim_spec
from .result import AllocationPlan, PlacedClaim, PlacedDevice, PodOutcome, PoolUsage


def plan_cluster_allocation(compiled, inventory: Inventory, progress: Progress | None = None,
                            detail: bool = True) -> AllocationPlan:
    """Place every pod of a CompiledCluster on `inventory` (`detail`: see plan_pods)."""
    return plan_pods(compiled.cluster, inventory, device_classes(compiled), cluster_pods(compiled), progress, detail)


def plan_compiled(compiled, slices: str | Path | None = None, progress: Progress | None = None) -> AllocationPlan:
    """Plan a CompiledCluster on its synthesized inventory, or on exported `slices`."""
    with bulk_objects():
        inventory = load_slices(slices, compiled.cluster, compiled.node_labels) if slices else synthesize_for(compiled)
        return plan_cluster_allocation(compiled, inventory, progress)


def plan_compilation(compilation, slices: str | Path | None = None,
                     progress: Callable[[str], Progress | None] | None = None) -> list[AllocationPlan]:
    """Plan every compiled cluster on its synthesized inventory, or (one cluster) on exported `slices`."""
    return [plan_compiled(compiled, slices, progress(name) if progress else None)
            for name, compiled in compilation.clusters.items()]


__all__ = [
    "AllocationPlan", "ClaimError", "ClaimSpec", "Constraint", "DeviceClass", "Option", "PlacedClaim", "PlacedDevice",
    "Pod", "PodClaim", "PodOutcome", "PoolUsage", "Progress", "Request", "channel_claim_spec", "cluster_pods",
    "device_classes", "parse_claim_spec", "placement_order", "plan_cluster_allocation", "plan_compilation", "plan_compiled", "plan_pods",
]
