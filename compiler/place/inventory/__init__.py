"""Inventory: the ResourceSlices of a cluster, synthesized from its intents or loaded from a real export."""

from __future__ import annotations

from typing import Any

from .model import AttrValue, CounterUse, Device, Inventory, NodeInfo, PoolState, ResourceSlice, build_inventory, natural_key
from .published import published
from .synth import SYNTHESIZED, DriverSetup, driver_setup, node_names, synthesize


def chart_values(compiled: Any) -> dict[str, Any]:
    """The DRA driver release values of a compiled cluster (what decides the published devices)."""
    for release in compiled.releases:
        if release.component == "dra-driver":
            return release.values
    return {}


def synthesize_for(compiled: Any) -> Inventory:
    """The synthesized inventory of a CompiledCluster."""
    return synthesize(compiled.cluster, chart_values(compiled), compiled.node_labels)


__all__ = [
    "AttrValue", "CounterUse", "Device", "DriverSetup", "Inventory", "NodeInfo", "PoolState", "ResourceSlice",
    "SYNTHESIZED", "build_inventory", "chart_values", "driver_setup", "natural_key", "node_names", "published",
    "synthesize", "synthesize_for",
]
