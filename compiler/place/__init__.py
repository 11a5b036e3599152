"""Stage 5, place: the devices a lowered cluster publishes, and every pod of it placed on them.

The inventory is what the cluster's DRA driver would publish (synthesized from the compiled chart
values and node labels) or what a real cluster published (exported ResourceSlices); the allocator
places the pods the compiled objects describe on it, with the structured allocator's semantics.
Both consume lowered objects, which is why this stage comes after `lower`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..diagnostics import Diagnostic
from ..load.state import ClusterState
from ..lower.graph import CompiledCluster
from .allocator import AllocationPlan, Progress, cluster_pods, device_classes, plan_pods
from .headroom import headroom
from .held import NO_USE, ClusterUse, cluster_use
from .inventory import Inventory, synthesize
from .inventory.load import GROUP, load_slices


def dra_values(compiled: CompiledCluster) -> dict[str, Any]:
    """The DRA driver's settings as chart values (what decides the devices it publishes)."""
    return compiled.driver_values


def synthesize_for(compiled: CompiledCluster) -> Inventory:
    """The devices the cluster's driver would publish on its node pools."""
    return synthesize(compiled.cluster, dra_values(compiled), compiled.node_labels)


def running_inventory(compiled: CompiledCluster, state: ClusterState) -> tuple[Inventory, ClusterUse]:
    """The devices a running cluster published and what its allocated claims already hold. A state without
    ResourceSlices is planned on the synthesized devices, and its claims cannot be counted: a warning says so."""
    if not state.of(GROUP, "ResourceSlice"):
        inventory = synthesize_for(compiled)
        claims = [c for c in state.of(GROUP, "ResourceClaim") if c.status.get("allocation")]
        if claims:
            inventory.warnings += (Diagnostic(
                state.display, 0, "(ResourceSlices)",
                f"the cluster state holds {len(claims)} allocated ResourceClaim(s) but no ResourceSlice: planned on the "
                "synthesized devices, where the devices those claims hold cannot be found, so they are not counted",
                "export resourceslices together with resourceclaims", "warning"),)
        return inventory, ClusterUse(live=True)
    inventory = load_slices(state, compiled.cluster, compiled.node_labels)
    return inventory, cluster_use(compiled, state, inventory)


def place_cluster(compiled: CompiledCluster, inventory: Inventory, progress: Progress | None = None,
                  detail: bool = True, use: ClusterUse = NO_USE) -> AllocationPlan:
    """Place every pod of the cluster on `inventory`, where the claims of `use` already hold their devices.
    Without `detail` only where each pod goes and why it cannot go is recorded (the render gate), not its
    devices or pool use."""
    classes = device_classes(compiled, dra_values(compiled))
    return plan_pods(compiled.cluster, inventory, classes, cluster_pods(compiled), progress, detail, use)


def with_headroom(compiled: CompiledCluster, plan: AllocationPlan, live: bool = False) -> AllocationPlan:
    """`plan` with its headroom: per pool what is left, and for pods that cannot be placed, the nodes to add."""
    found = headroom(compiled.cluster, dra_values(compiled), compiled.node_labels, device_classes(compiled, dra_values(compiled)),
                     cluster_pods(compiled), plan, verify=not live)
    return dataclasses.replace(plan, headroom=found)


__all__ = ["NO_USE", "AllocationPlan", "ClusterUse", "Inventory", "Progress", "dra_values", "place_cluster", "running_inventory",
           "synthesize_for", "with_headroom"]
