"""Offline DRA allocation with the semantics of the Kubernetes structured allocator (issue #4).

`plan_pods` places pods on an inventory (synthesized or loaded) and returns an AllocationPlan:
placements, per-pool use, and an actionable reason for each pod that cannot be placed. State
(state.py) and search (search.py) are separate, as in k8s.io/dynamic-resource-allocation/structured.
`compiler.place.place_cluster` is the entry point for a compiled cluster.
"""

from __future__ import annotations

from .planner import Progress, placement_order, plan_pods
from .pods import Pod, PodClaim, channel_claim_spec, cluster_pods, device_classes
from .requests import ClaimError, ClaimSpec, Constraint, DeviceClass, Option, Request, parse_claim_spec
from .result import AllocationPlan, PlacedClaim, PlacedDevice, PodOutcome, PoolUsage

__all__ = [
    "AllocationPlan", "ClaimError", "ClaimSpec", "Constraint", "DeviceClass", "Option", "PlacedClaim", "PlacedDevice",
    "Pod", "PodClaim", "PodOutcome", "PoolUsage", "Progress", "Request", "channel_claim_spec", "cluster_pods",
    "device_classes", "parse_claim_spec", "placement_order", "plan_pods",
]
