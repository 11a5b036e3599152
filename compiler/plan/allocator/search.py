"""Allocate all of one pod's claims on one node: the depth-first search of the 1.34 structured allocator.

Claims in pod order, requests in claim order, `firstAvailable` subrequests in list order (a later one
only after the earlier failed for the whole rest of the search), devices in inventory order with
backtracking. Like the 1.35 allocator, a request's next device is searched after the previous
one: the first solution is the same as 1.34's permutation search finds, without revisiting
orderings of the same devices. `All` takes every matching device of the node or fails; matchAttribute
constraints, shared counters and devices already in use refuse a device; admin access ignores
other allocations. Errors the scheduler treats as fatal (a CEL evaluation error on a device the
search reaches, an incomplete pool under All) raise AllocationError.
"""

from __future__ import annotations

from typing import Any

from ...facts.platform import dra_limits
from ..inventory import Device
from .candidates import DeviceIndex
from .pods import PodClaim
from .requests import ALL, Constraint, Option
from .state import AllocationState, ClaimResult, DeviceResult


class AllocationError(Exception):
    """The scheduler would abort scheduling the pod with an error, not leave it Pending."""


def typed_value(value: Any) -> tuple:
    """matchAttribute compares type and value; versions as their text."""
    return (value.__class__, value if value.__class__ in (bool, int, str) else str(value))


class _Match:
    """One matchAttribute constraint during the search: the value the first device fixed, and how many hold it."""

    __slots__ = ("constraint", "value", "count")

    def __init__(self, constraint: Constraint) -> None:
        self.constraint = constraint
        self.value: tuple | None = None
        self.count = 0

    def add(self, device: Device) -> bool:
        value = device.attribute(self.constraint.attribute)
        if value is None:
            return False
        typed = typed_value(value)
        if self.count and typed != self.value:
            return False
        self.value = typed
        self.count += 1
        return True


class _Search:
    def __init__(self, node: str, claims: list[PodClaim], index: DeviceIndex, state: AllocationState) -> None:
        self.node, self.claims, self.index, self.state = node, claims, index, state
        self.devices = index.inventory.devices
        self.limit = dra_limits()["devicesPerClaim"]
        self.steps = [(ci, r) for ci, c in enumerate(claims) for r in c.spec.requests]  # type: ignore[union-attr]
        self.taking: dict[int, int] = {}  # device -> how many picks of this call hold it
        self.claim_taking: set[tuple[int, int]] = set()  # (claim, device)
        self.counter_use: dict[tuple[int, str, str], Any] = {}
        self.picked: list[list[DeviceResult]] = [[] for _ in claims]
        self.matches = [[_Match(c) for c in claim.spec.constraints] for claim in claims]  # type: ignore[union-attr]

    def run(self) -> list[ClaimResult] | None:
        if not self._step(0):
            return None
        return [ClaimResult(c, self.node, tuple(p)) for c, p in zip(self.claims, self.picked)]

    def _step(self, k: int) -> bool:
        if k == len(self.steps):
            return True
        ci, request = self.steps[k]
        for option in request.options:
            if option.mode == ALL:
                if self._all(ci, option, k):
                    return True
            elif self._exact(ci, option, option.count, 0, k):
                return True
        return False

    def _available(self, ci: int, option: Option, d: int) -> bool:
        if option.admin_access:
            return (ci, d) not in self.claim_taking
        return not self.state.in_use[d] and d not in self.taking

    def _exact(self, ci: int, option: Option, remaining: int, start: int, k: int) -> bool:
        if remaining == 0:
            return self._step(k + 1)
        if len(self.picked[ci]) + remaining > self.limit:
            return False
        candidates = self.index.candidates(option, self.node)
        errors = self.index.match(option).errors
        for pos in range(start, len(candidates) - remaining + 1):
            d = candidates[pos]
            if not self._available(ci, option, d):
                continue
            if d in errors:
                raise AllocationError(errors[d])
            if self._take(ci, option, d, must=False):
                if self._exact(ci, option, remaining - 1, pos + 1, k):
                    return True
                self._release(ci, option, d)
        return False

    def _all(self, ci: int, option: Option, k: int) -> bool:
        for pool in self.index.node_pools(self.node):
            if pool.incomplete or pool.invalid:
                state = "invalid (device name repeated)" if pool.invalid else f"incomplete ({pool.slices} of {pool.expected} slices)"
                raise AllocationError(f"request '{option.name}' asks for all devices, but resource pool "
                                      f"{pool.driver}/{pool.name} is {state}")
        candidates = self.index.candidates(option, self.node)
        if not candidates or len(self.picked[ci]) + len(candidates) > self.limit:
            return False
        errors = self.index.match(option).errors
        taken: list[int] = []
        complete = True
        for d in candidates:
            if d in errors:
                raise AllocationError(errors[d])
            if not self._available(ci, option, d) or not self._take(ci, option, d, must=True):
                complete = False
                break
            taken.append(d)
        if complete and self._step(k + 1):
            return True
        for d in reversed(taken):
            self._release(ci, option, d)
        return False

    def _take(self, ci: int, option: Option, d: int, must: bool) -> bool:
        device = self.devices[d]
        counted = device.consumes and not option.admin_access
        if counted and not self._consume(device):
            return False
        added = []
        for m in self.matches[ci]:
            if not m.constraint.applies(option.name):
                continue
            if not m.add(device):
                for earlier in added:
                    earlier.count -= 1
                if counted:
                    self._unconsume(device)
                if must:
                    raise AllocationError(f"request '{option.name}' asks for all devices, but device "
                                          f"{self.index.describe(d)} breaks the claim's matchAttribute {m.constraint.attribute}")
                return False
            added.append(m)
        self.taking[d] = self.taking.get(d, 0) + 1
        self.claim_taking.add((ci, d))
        self.picked[ci].append(DeviceResult(option.name, d, option.admin_access))
        return True

    def _release(self, ci: int, option: Option, d: int) -> None:
        device = self.devices[d]
        self.picked[ci].pop()
        self.claim_taking.discard((ci, d))
        left = self.taking[d] - 1
        if left:
            self.taking[d] = left
        else:
            del self.taking[d]
        for m in self.matches[ci]:
            if m.constraint.applies(option.name):
                m.count -= 1
        if device.consumes and not option.admin_access:
            self._unconsume(device)

    def _consume(self, device: Device) -> bool:
        left = self.state.counters(device.slice_index)
        for use in device.consumes:
            available = left.get(use.counter_set)
            if available is None:
                return False
            for name, quantity in use.counters:
                if available.get(name, 0) - self.counter_use.get((device.slice_index, use.counter_set, name), 0) < quantity.value:
                    return False
        for use in device.consumes:
            for name, quantity in use.counters:
                key = (device.slice_index, use.counter_set, name)
                self.counter_use[key] = self.counter_use.get(key, 0) + quantity.value
        return True

    def _unconsume(self, device: Device) -> None:
        for use in device.consumes:
            for name, quantity in use.counters:
                key = (device.slice_index, use.counter_set, name)
                self.counter_use[key] -= quantity.value


def allocate_on_node(node: str, claims: list[PodClaim], index: DeviceIndex, state: AllocationState) -> list[ClaimResult] | None:
    """One ClaimResult per claim when all of them fit on `node` together, else None; AllocationError when fatal."""
    return _Search(node, claims, index, state).run()
