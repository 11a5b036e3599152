"""Allocate all of one pod's claims on one node: the depth-first search of the 1.34 structured allocator.

Claims in pod order, requests in claim order, `firstAvailable` subrequests in list order (a later one
only after the earlier failed for the whole rest of the search), devices in inventory order with
backtracking. Like the 1.35 allocator, a request's next device is searched after the previous
one: the first solution is the same as 1.34's permutation search finds, without revisiting
orderings of the same devices. `All` takes every matching device of the node or fails; matchAttribute
constraints, shared counters and devices already in use refuse a device; admin access ignores
other allocations of the device, but not its shared counters. Errors the scheduler treats as fatal
(a CEL evaluation error on a device the search reaches, an invalid pool the search reaches, an
incomplete pool under All) raise AllocationError.
"""

from __future__ import annotations

from typing import Any

from ...cel import AttrList, CelEvaluationError
from ...facts.platform import dra_limits
from ..inventory import Device
from ..inventory.capacity import CapacityError, Consumption, consumption, fits
from .candidates import DeviceIndex
from .pods import PodClaim
from .requests import ALL, Constraint, Option
from .state import AllocationState, ClaimResult, DeviceResult


class AllocationError(Exception):
    """The scheduler would abort scheduling the pod with an error, not leave it Pending."""


def typed_value(value: Any) -> tuple:
    """matchAttribute compares type and value; versions as their text."""
    return (value.__class__, value if value.__class__ in (bool, int, str) else str(value))


def typed_set(value: Any) -> frozenset | None:
    """A value as the set of its typed elements, as the allocator compares them with DRAListTypeAttributes on: a
    scalar is a one-element set; an empty list has no known type (None), as upstream's attributeAsSet."""
    if value.__class__ is AttrList:
        return frozenset(typed_value(v) for v in value.items) or None
    return frozenset((typed_value(value),))


_UNTYPED = object()  # a list value with DRAListTypeAttributes off: equal to nothing, itself included


class _Match:
    """One matchAttribute (or distinctAttribute) constraint during the search, over the devices picked so far for
    the requests it names, in pick order (a release drops the last). Without DRAListTypeAttributes it keeps their
    values: match wants all equal, distinct all different, and a list value passes only as a constraint's first
    device (the allocator checks the first device for the attribute only, then knows no list type). With the gate
    it keeps sets: match keeps the running intersection of the values (it must stay non-empty; a release restores
    the previous one), distinct wants each new value disjoint from every earlier one."""

    __slots__ = ("constraint", "lists", "values")

    def __init__(self, constraint: Constraint, lists: bool) -> None:
        self.constraint = constraint
        self.lists = lists
        self.values: list = []

    def add(self, value: Any) -> bool:
        """Whether a device whose value of the attribute is `value` (None: it has none) may join."""
        if value is None:
            return False
        if self.lists:
            return self._add_set(typed_set(value))
        if value.__class__ is AttrList:
            if self.values:
                return False
            self.values.append(_UNTYPED)
            return True
        typed = typed_value(value)
        if self.constraint.distinct:
            if typed in self.values:
                return False
        elif self.values and typed != self.values[0]:
            return False
        self.values.append(typed)
        return True

    def _add_set(self, values: frozenset | None) -> bool:
        if self.constraint.distinct:
            if self.values and (values is None or any(values & earlier for earlier in self.values)):
                return False
            self.values.append(values or frozenset())  # upstream takes a first device of any value unchecked
            return True
        if values is None:
            return False
        if self.values:
            values = self.values[-1] & values
            if not values:
                return False
        self.values.append(values)
        return True

    def remove(self) -> None:
        self.values.pop()


class _Search:
    def __init__(self, node: str, claims: list[PodClaim], index: DeviceIndex, state: AllocationState) -> None:
        self.node, self.claims, self.index, self.state = node, claims, index, state
        self.devices = index.inventory.devices
        self.limit = dra_limits()["devicesPerClaim"]
        self.steps = [(ci, r) for ci, c in enumerate(claims) for r in c.spec.requests]  # type: ignore[union-attr]
        # the fewest devices the claim's later requests need: an option that leaves them no room under the
        # per-claim limit is pruned before its devices are searched (32 of 64 devices is 1.8e18 combinations)
        self.after = [sum(r.min_devices for cj, r in self.steps[k + 1:] if cj == ci) for k, (ci, _) in enumerate(self.steps)]
        self.taking: dict[int, int] = {}  # device -> how many picks of this call hold it
        self.consuming: dict[int, Consumption] = {}  # device -> capacity this call's picks consume of it (multi devices)
        self.claim_taking: set[tuple[int, int]] = set()  # (claim, device)
        self.counter_use: dict[tuple[tuple[str, str], str, str], Any] = {}  # (pool, set, counter) -> used by this call
        self.group_use: dict[tuple[tuple[str, str], str], list[frozenset[str]]] = {}  # (pool, set) -> groups this call drew
        self.invalid = index.invalid_devices
        self.picked: list[list[DeviceResult]] = [[] for _ in claims]
        lists = index.features.on("DRAListTypeAttributes")
        self.matches = [[_Match(c, lists) for c in claim.spec.constraints] for claim in claims]  # type: ignore[union-attr]

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
        if self.state.multi[d] and self.state.in_use[d]:
            return False  # allocated before as a dedicated device: not shareable now
        if option.capacity or self.state.multi[d]:
            return self._has_capacity(option, d)
        if option.admin_access:
            return (ci, d) not in self.claim_taking
        return not self.state.in_use[d] and d not in self.taking

    def _has_capacity(self, option: Option, d: int) -> bool:
        """Consumable capacity: a device that allows multiple allocations holds the request while its
        capacities last; any other device must be free and large enough for every amount requested."""
        device = self.devices[d]
        taken = self._consumption(option, d)
        if taken is None:
            return False
        if not device.multi:
            return not self.state.in_use[d] and d not in self.taking
        return fits(device, taken, self.state.consumed.get(d), self.consuming.get(d))

    def _consumption(self, option: Option, d: int) -> Consumption | None:
        try:
            return consumption(self.devices[d], option.capacity)
        except CapacityError as exc:
            raise AllocationError(f"request '{option.name}': checking capacity for device {self.index.describe(d)}: {exc}; "
                                  "the scheduler aborts the pod's scheduling on it: request a positive amount the "
                                  "device's requestPolicy can round within int64") from None

    def _exact(self, ci: int, option: Option, remaining: int, start: int, k: int) -> bool:
        if remaining == 0:
            return self._step(k + 1)
        if len(self.picked[ci]) + remaining + self.after[k] > self.limit:
            return False
        candidates = self.index.candidates(option, self.node)
        errors = self.index.match(option).errors
        for pos in range(start, len(candidates) - remaining + 1):
            d = candidates[pos]
            if self.invalid and d in self.invalid:
                raise AllocationError(self._invalid_pool(option, d))
            if not self._available(ci, option, d):
                continue
            if d in errors:
                raise AllocationError(errors[d])
            if self._take(ci, option, d, must=False):
                if self._exact(ci, option, remaining - 1, pos + 1, k):
                    return True
                self._release(ci, option, d)
        return False

    def _invalid_pool(self, option: Option, d: int) -> str:
        pool = self.index.inventory.states()[self.index.inventory.pool_key(self.devices[d])]
        return (f"request '{option.name}' reached resource pool {pool.driver}/{pool.name}, which is invalid: device "
                f"'{pool.duplicate}' is published in more than one of its slices, and the scheduler fails the pod when "
                "its search reaches an invalid pool; the driver must publish each device once (re-export the slices "
                "after the driver has settled, or restart its kubelet plugin on that node)")

    def _all(self, ci: int, option: Option, k: int) -> bool:
        for pool in self.index.node_pools(self.node):
            if pool.incomplete or pool.invalid:
                state = "invalid (device name repeated)" if pool.invalid else f"incomplete ({pool.slices} of {pool.expected} slices)"
                raise AllocationError(f"request '{option.name}' asks for all devices, but resource pool "
                                      f"{pool.driver}/{pool.name} is {state}")
        candidates = self.index.candidates(option, self.node)
        if option.capacity:  # All with capacity requests: devices without enough of the capacity are left out
            candidates = [d for d in candidates if self._consumption(option, d) is not None]
        if not candidates or len(self.picked[ci]) + len(candidates) + self.after[k] > self.limit:
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

    def _counted(self, d: int) -> bool:
        """Whether a pick of device `d` charges its counters: always (admin access too: it ignores other
        allocations, not the counters), except a device allowing multiple allocations that is already
        allocated, whose counters its first allocation charged."""
        device = self.devices[d]
        return bool(device.consumes) and not (device.multi and (self.state.held[d] or d in self.taking))

    def _take(self, ci: int, option: Option, d: int, must: bool) -> bool:
        device = self.devices[d]
        counted = self._counted(d)
        if counted and not self._consume(device):
            return False
        added: list = []
        for m in self.matches[ci]:
            if not m.constraint.applies(option.name):
                continue
            if not m.add(self._attribute(option, d, m.constraint.attribute)):
                for earlier in added:
                    earlier.remove()
                if counted:
                    self._unconsume(device)
                if must:
                    raise AllocationError(f"request '{option.name}' asks for all devices, but device "
                                          f"{self.index.describe(d)} breaks the claim's matchAttribute {m.constraint.attribute}")
                return False
            added.append(m)
        self.taking[d] = self.taking.get(d, 0) + 1
        self.claim_taking.add((ci, d))
        taken = self._consumption(option, d) if device.multi else None
        if taken:
            mine = self.consuming.setdefault(d, {})
            for key, amount in taken.items():
                mine[key] = mine.get(key, 0) + amount
        self.picked[ci].append(DeviceResult(option.name, d, option.admin_access, taken, bool(option.capacity)))
        return True

    def _attribute(self, option: Option, d: int, name: str) -> Any:
        """The device's value of attribute `name` as the option's constraints see it: a derived attribute of the
        option (DRADerivedAttributes) of that name, evaluated now, else the device's own."""
        for derived, expression in option.derived:
            if derived == name:
                try:
                    return self.index.derived(name, expression, d)
                except CelEvaluationError as exc:
                    raise AllocationError(str(exc)) from None
        return self.devices[d].attribute(name)

    def _release(self, ci: int, option: Option, d: int) -> None:
        device = self.devices[d]
        taken = self.picked[ci].pop().taken
        if taken:
            mine = self.consuming[d]
            for key, amount in taken.items():
                mine[key] -= amount
        self.claim_taking.discard((ci, d))
        left = self.taking[d] - 1
        if left:
            self.taking[d] = left
        else:
            del self.taking[d]
        for m in self.matches[ci]:
            if m.constraint.applies(option.name):
                m.remove()
        if self._counted(d):
            self._unconsume(device)

    def _consume(self, device: Device) -> bool:
        """Add the device's counters to this call's use, and keep them only if no counter of any set of the
        pool is then over-committed: like `checkAvailableCounters`, which checks every counter of the pool,
        not only the device's own (an allocated state that already overdraws one blocks them all). A set or
        counter the pool does not define limits nothing, as there (the slices loader warns about it)."""
        pool = self.index.inventory.pool_of(device)
        if self.index.grouping and not self._compatible(device, pool):
            return False
        left = self.state.counters(pool)
        use = self.counter_use
        for key, amount in _uses(device, pool, left):
            use[key] = use.get(key, 0) + amount
        for set_name, counters in left.items():
            for name, available in counters.items():
                if available < use.get((pool, set_name, name), 0):
                    self._unconsume(device)
                    return False
        return True

    def _unconsume(self, device: Device) -> None:
        pool = self.index.inventory.pool_of(device)
        for key, amount in _uses(device, pool, self.state.counters(pool)):
            self.counter_use[key] -= amount
        if self.index.grouping:
            for u in device.consumes:
                if u.groups:
                    self.group_use[(pool, u.counter_set)].remove(frozenset(u.groups))

    def _compatible(self, device: Device, pool: tuple[str, str]) -> bool:
        """DRADeviceCompatibilityGroups: each counter set the device draws from with declared groups shares a group
        with every device already drawing from it with groups (allocated before, or picked by this call), and then
        holds the device's groups. A draw without groups constrains nothing and is not constrained (no table case
        of k8s.io/dynamic-resource-allocation v0.37.2 decides it: gpuc's reading)."""
        uses = [((pool, u.counter_set), frozenset(u.groups)) for u in device.consumes if u.groups]
        for key, mine in uses:
            if any(not mine & other for other in self.state.groups.get(key, ())) or \
                    any(not mine & other for other in self.group_use.get(key, ())):
                return False
        for key, mine in uses:
            self.group_use.setdefault(key, []).append(mine)
        return True


def _uses(device: Device, pool: tuple[str, str], left: dict) -> list[tuple[tuple[tuple[str, str], str, str], Any]]:
    """(pool, set, counter) and amount of each counter the device consumes that its pool defines."""
    return [((pool, u.counter_set, name), q.value) for u in device.consumes if u.counter_set in left
            for name, q in u.counters if name in left[u.counter_set]]


def allocate_on_node(node: str, claims: list[PodClaim], index: DeviceIndex, state: AllocationState) -> list[ClaimResult] | None:
    """One ClaimResult per claim when all of them fit on `node` together, else None; AllocationError when fatal."""
    return _Search(node, claims, index, state).run()
