"""Stage 5, place: the devices a lowered cluster publishes, and every pod of it placed on them.

The inventory is what the cluster's DRA driver would publish (synthesized from the compiled chart
values and node labels) or what a real cluster published (exported ResourceSlices); the allocator
places the pods the compiled objects describe on it, with the structured allocator's semantics.
Both consume lowered objects, which is why this stage comes after `lower`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..lower.graph import CompiledCluster
from .allocator import AllocationPlan, Progress, cluster_pods, device_classes, plan_pods
from .inventory import Inventory, synthesize
from .inventory.load import load_slices


def dra_values(compiled: CompiledCluster) -> dict[str, Any]:
    """The DRA driver's settings as chart values (what decides the devices it publishes)."""
    return compiled.driver_values


def synthesize_for(compiled: CompiledCluster) -> Inventory:
    """The devices the cluster's driver would publish on its node pools."""
    return synthesize(compiled.cluster, dra_values(compiled), compiled.node_labels)


def exported_inventory(compiled: CompiledCluster, slices: Path) -> Inventory:
    """The devices a real cluster published (`kubectl get resourceslices -o yaml`)."""
    return load_slices(slices, compiled.cluster, compiled.node_labels)


def place_cluster(compiled: CompiledCluster, inventory: Inventory, progress: Progress | None = None,
                  detail: bool = True) -> AllocationPlan:
    """Place every pod of the cluster on `inventory`. Without `detail` only where each pod goes and why
    it cannot go is recorded (the render gate), not its devices or pool use."""
    classes = device_classes(compiled, dra_values(compiled))
    return plan_pods(compiled.cluster, inventory, classes, cluster_pods(compiled), progress, detail)


__all__ = ["AllocationPlan", "Inventory", "Progress", "dra_values", "exported_inventory", "place_cluster", "synthesize_for"]
