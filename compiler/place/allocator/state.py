"""Allocator state: what is allocated so far, kept apart from the search that reads it.

Like `structured.AllocatedState` in Kubernetes: the devices in use, the shared counters each pool
has left, the capacity consumed of devices that allow multiple allocations, and the shared
ResourceClaims already allocated (pinned to their node). The search never writes here; a successful
placement is applied with `commit`.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import NamedTuple

from ..inventory import Inventory
from ..inventory.capacity import Consumption
from .pods import PodClaim


class DeviceResult(NamedTuple):  # NamedTuples: built per device tried and per claim placed
    request: str  # the request, or "request/subrequest" for firstAvailable
    device: int  # index into Inventory.devices
    admin: bool = False  # adminAccess: does not make the device unavailable to others
    taken: Consumption | None = None  # what it consumes of a device that allows multiple allocations
    asked: bool = False  # the request named capacity amounts (a fractional claim), so reports show what it took


class ClaimResult(NamedTuple):
    claim: PodClaim
    node: str
    devices: tuple[DeviceResult, ...]


class AllocationState:
    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.in_use = bytearray(len(inventory.devices))  # allocated, so no other claim may have it
        self.held = bytearray(len(inventory.devices))  # allocated at all (devices allowing multiple allocations too)
        self.multi = bytearray(d.multi for d in inventory.devices)
        self.consumed: dict[int, Consumption] = {}  # device -> capacity its allocations consume
        self.pinned: dict[str, ClaimResult] = {}  # shared claim key -> its allocation
        self.holders: dict[int, str] = {}  # device -> the claim already in the cluster that holds it
        self.placed: dict[int, str] = {}  # device -> the workload (ns/name) whose pod this plan gave it first
        self._counters: dict[tuple[str, str], dict[str, dict[str, int | Fraction]]] = {}
        # (pool, counter set) -> the compatibility groups of each allocated device drawing from it (declared only)
        self.groups: dict[tuple[tuple[str, str], str], list[frozenset[str]]] = {}
        # Devices not in use, per node they are bound to (None: node-independent slices), any driver: a node
        # with fewer than a pod needs is skipped without a search.
        self._free: dict[str | None, int] = {}
        for device in inventory.devices:
            node = self._node(device)
            self._free[node] = self._free.get(node, 0) + 1

    def _node(self, device) -> str | None:
        return device.node_name or self.inventory.slices[device.slice_index].node_name

    def free_on(self, node: str) -> int:
        """An upper bound of the devices still free for a pod on `node`."""
        return self._free.get(node, 0) + self._free.get(None, 0)

    def counters(self, pool: tuple[str, str]) -> dict[str, dict[str, int | Fraction]]:
        """What is left of a resource pool's shared counters, per counter set. May go negative, as in the
        scheduler; a 1.34 slice keeps its sets beside its devices, a 1.35 pool in slices of their own."""
        left = self._counters.get(pool)
        if left is None:
            shared = self.inventory.counter_sets.get(pool, {})
            left = self._counters[pool] = {name: {c: q.value for c, q in counters.items()} for name, counters in shared.items()}
        return left

    def commit(self, results: list[ClaimResult], workload: str = "") -> None:
        """Allocate the devices of a pod's claims; `workload` (ns/name) is named when a later pod finds them taken."""
        for result in results:
            for picked in result.devices:
                if not picked.admin:
                    # admin access is not an allocation others respect: the scheduler leaves admin-access
                    # results out of the allocated devices, so they neither block the device nor hold its counters
                    self._take(picked.device, picked.taken)
                    if workload:
                        self.placed.setdefault(picked.device, workload)
            if result.claim.shared:
                self.pinned[result.claim.key] = result

    def hold(self, claim: str, devices: Iterable[tuple[int, Consumption | None]]) -> None:
        """Devices a claim already allocated in the cluster holds, before anything is placed."""
        for index, taken in devices:
            self.holders.setdefault(index, claim)
            self._take(index, taken)

    def _take(self, index: int, taken: Consumption | None) -> None:
        """Record one allocation of a device. `taken` None on a device that allows multiple allocations is a
        dedicated allocation (the scheduler's allocated devices): nobody may share it then. Counters are
        charged by the first allocation of a device only."""
        device = self.inventory.devices[index]
        for alias in self.inventory.aliases.get(index, ()):  # the same device in another node's view of its pool
            self.held[alias] = 1
            if not (device.multi and taken is not None) and not self.in_use[alias]:
                self.in_use[alias] = 1
                self._free[self._node(self.inventory.devices[alias])] -= 1
        first = not self.held[index]
        self.held[index] = 1
        if device.multi and taken is not None:  # others may still get it while its capacity lasts
            if taken:
                total = self.consumed.setdefault(index, {})
                for key, amount in taken.items():
                    total[key] = total.get(key, 0) + amount
        elif not self.in_use[index]:
            self.in_use[index] = 1
            self._free[self._node(device)] -= 1
        if not first and device.multi:
            return
        pool = self.inventory.pool_of(device) if device.consumes else None
        for use in device.consumes:
            if use.groups:
                self.groups.setdefault((pool, use.counter_set), []).append(frozenset(use.groups))  # type: ignore[arg-type]
            left = self.counters(pool).get(use.counter_set)  # type: ignore[arg-type]
            for name, quantity in use.counters:
                if left is not None and name in left:  # counters no set defines limit nothing
                    left[name] -= quantity.value
