"""Inventory: the ResourceSlices of a cluster, synthesized from its intents or loaded from a real export."""

from __future__ import annotations

from .model import AttrValue, CounterUse, Device, Inventory, NodeInfo, PoolState, ResourceSlice, build_inventory, natural_key
from .published import published
from .synth import SYNTHESIZED, DriverSetup, driver_setup, node_names, synthesize

__all__ = [
    "AttrValue", "CounterUse", "Device", "DriverSetup", "Inventory", "NodeInfo", "PoolState", "ResourceSlice",
    "SYNTHESIZED", "build_inventory", "driver_setup", "natural_key", "node_names", "published", "synthesize",
]
