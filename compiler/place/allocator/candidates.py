"""Which devices each request option may take, computed once per (class, selectors) before any search.

Class selectors run first, then the request's own, in order, on every device, as `isSelectable`
does; every expression is compiled once and its results memoised across devices (compiler.cel).
A device whose evaluation fails stays in the candidate list, marked with the error: the search
raises it when it reaches that device, which is when the scheduler would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...cel import CelCompileError, CelEvaluationError, Selector, compile_selector
from ...cel.library import from_cel
from ..inventory import Device, Inventory, PoolState
from ..inventory.selection import select
from .features import ALL, AllocatorFeatures
from .nodes import node_matches
from .requests import ClaimError, DeviceClass, Option

OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"  # the gate, and the node feature the scheduler requires


@dataclass
class Match:
    """The devices an option selects, in inventory order, with the evaluation errors hit on the way."""

    devices: list[int]
    errors: dict[int, str]
    by_node: dict[str, list[int]]
    floating: list[int]  # devices not bound to a single node: allNodes, nodeSelector, per-device selection
    per_node: dict[str, list[int]] = field(default_factory=dict)


def _compile(texts: tuple[str, ...], owner: str, features: AllocatorFeatures) -> list[Selector]:
    selectors = []
    for i, text in enumerate(texts):
        try:
            selectors.append(compile_selector(text, features.on("DRAConsumableCapacity"), features.on("DRAListTypeAttributes")))
        except CelCompileError as exc:
            raise ClaimError(f"{owner} selector {i} does not compile: {exc}") from None
    return selectors


class DeviceIndex:
    """Candidate devices per option and node, over one inventory."""

    def __init__(self, inventory: Inventory, classes: dict[str, DeviceClass], features: AllocatorFeatures = ALL) -> None:
        self.inventory = inventory
        self.classes = classes
        self.features = features
        self._taints = features.on("DRADeviceTaints") and any(d.taints for d in inventory.devices)
        self._class_matches: dict[str, tuple[list[int], dict[int, str]]] = {}
        self._matches: dict[tuple, Match] = {}
        self._derived: dict[tuple[str, str, int], Any] = {}  # (name, expression, device) -> a derived attribute's value
        self._by_option: dict[int, tuple[Option, Match]] = {}  # by identity: options are shared by all pods of a template
        self._node_pools: dict[str, list[PoolState]] = {}
        slices = inventory.slices
        self.node_of: list[str | None] = [d.node_name or slices[d.slice_index].node_name for d in inventory.devices]
        self._bound_pools: dict[str, list[tuple[str, str]]] = {}
        self._floating_slices = [s for s in slices if s.node_name is None]
        states = inventory.states()  # keyed by Inventory.pool_key: a pool, or a node's view of an older generation
        invalid = {key for key, pool in states.items() if self.pool_invalid(pool)}
        # 1.35 on: devices of incomplete or invalid pools are skipped, not used or fatal
        self._unusable = invalid | {key for key, pool in states.items() if pool.incomplete} \
            if features.skips_unusable_pools else set()
        self.any_invalid = bool(invalid) and features.skips_unusable_pools  # 1.35+: a failing pod may be an error
        if self._unusable:
            invalid = set()
        # Without DRADeviceCompatibilityGroups the scheduler skips a pool whose devices declare compatibility
        # groups, all of its devices (it cannot honour the groups)
        grouped = {key for key, pool in inventory.pools.items() if pool.grouped}
        self._hidden = set() if features.on("DRADeviceCompatibilityGroups") else grouped
        self.grouping = bool(grouped) and not self._hidden  # the search checks compatibility groups
        # DRAOptionalNodeOperations: devices whose slice skips node operations only on nodes declaring the feature
        self._skipping = features.on(OPTIONAL_NODE_OPERATIONS) and any(s.skip_node_operations for s in slices)
        # The scheduler (1.36 on) takes a node's pools by driver and pool name, pools with binding conditions last
        self._waiting_pools = {inventory.pool_of(d) for d in inventory.devices if d.binding_conditions} \
            if features.binding else set()
        # Devices of pools that repeat a device name: the search fails when it reaches one (usually empty).
        self._binding = not features.binding and any(d.binding_conditions for d in inventory.devices)
        # Without DRAPartitionableDevices the scheduler sees neither devices consuming counters nor slices
        # selecting nodes per device.
        self._unpartitioned = not features.on("DRAPartitionableDevices") and any(
            d.consumes or slices[d.slice_index].per_device_node_selection for d in inventory.devices)
        self.invalid_devices = frozenset(d.index for d in inventory.devices if invalid and inventory.pool_key(d) in invalid)
        for s in slices:
            if s.node_name is not None:
                keys = self._bound_pools.setdefault(s.node_name, [])
                if (s.driver, s.pool) not in keys:
                    keys.append((s.driver, s.pool))

    # ------------------------------------------------------------------------------- matching
    def _evaluate(self, selectors: list[Selector], candidates: list[int], errors: dict[int, str]) -> list[int]:
        """`candidates` that pass every selector, plus those in `errors` or on which a selector fails (added
        to `errors`), in candidate order. Devices with binding conditions are candidates only with the gates on."""
        devices = self.inventory.devices
        if errors or self._binding or self._unpartitioned or self._unusable or self._hidden:
            remaining = tuple(i for i in candidates if i not in errors and self._visible(devices[i]))
        else:
            remaining = tuple(candidates)  # the usual case, without a pass over every device
        for selector in selectors:
            remaining, failures = select(self.inventory, selector, remaining)
            for i, message in failures.items():
                errors[i] = f"CEL selector `{selector.text}` failed on device {self.describe(i)}: {message}"
        if not errors:
            return list(remaining)  # `remaining` is `candidates` filtered, in their order
        keep = set(remaining)
        return [i for i in candidates if i in keep or i in errors]

    def _visible(self, device: Device) -> bool:
        """Whether the features on let the scheduler see the device at all."""
        if self._binding and device.binding_conditions:
            return False
        if self._unusable and self.inventory.pool_key(device) in self._unusable:
            return False
        if self._hidden and self.inventory.pool_of(device) in self._hidden:
            return False
        return not (self._unpartitioned and (device.consumes or self.inventory.slices[device.slice_index].per_device_node_selection))

    def class_match(self, name: str) -> tuple[list[int], dict[int, str]]:
        cached = self._class_matches.get(name)
        if cached is None:
            cls = self.classes.get(name)
            if cls is None:
                known = ", ".join(sorted(self.classes)) or "none"
                raise ClaimError(f"DeviceClass '{name}' does not exist on this cluster (classes: {known})")
            errors: dict[int, str] = {}
            devices = self._evaluate(_compile(cls.selectors, f"DeviceClass {name}", self.features), list(range(len(self.inventory.devices))), errors)
            cached = self._class_matches[name] = (devices, errors)
        return cached

    def match(self, option: Option) -> Match:
        known = self._by_option.get(id(option))
        if known is not None:
            return known[1]
        found = self._match(option)
        self._by_option[id(option)] = (option, found)  # holding the option keeps its id from being reused
        return found

    def _match(self, option: Option) -> Match:
        key = (option.device_class, option.selectors, option.tolerations)
        found = self._matches.get(key)
        if found is None:
            base, class_errors = self.class_match(option.device_class)
            errors = dict(class_errors)
            devices = self._evaluate(_compile(option.selectors, f"request '{option.name}'", self.features), base, errors) if option.selectors else base
            if self._taints:
                devices = [i for i in devices if not self._tainted(i, option)]
            by_node: dict[str, list[int]] = {}
            floating: list[int] = []
            node_of = self.node_of
            for i in devices:
                node = node_of[i]
                if node is None:
                    floating.append(i)
                else:
                    by_node.setdefault(node, []).append(i)
            found = self._matches[key] = Match(devices, errors, by_node, floating)
        return found

    def _tainted(self, index: int, option: Option) -> bool:
        """A NoSchedule or NoExecute taint the request does not tolerate keeps the device from it (other effects
        do not), as the scheduler's taintPreventsAllocation."""
        return any(effect in ("NoSchedule", "NoExecute") and not any(t.tolerates((key, value, effect)) for t in option.tolerations)
                   for key, value, effect in self.inventory.devices[index].taints)

    def candidates(self, option: Option, node: str) -> list[int]:
        """Devices on `node` the option selects, in the documented order."""
        m = self.match(option)
        if not m.floating and not self._skipping and not self._waiting_pools:
            return m.by_node.get(node, [])  # in inventory order: the node's pools by driver and name
        found = m.per_node.get(node)
        if found is None:
            info = self.inventory.by_name.get(node)
            extra = [i for i in m.floating if info is not None and self._serves(i, info)]
            found = sorted(m.by_node.get(node, []) + extra, key=self._rank)
            if self._skipping and not (info is not None and OPTIONAL_NODE_OPERATIONS in info.declared):
                devices, slices = self.inventory.devices, self.inventory.slices
                found = [i for i in found if not slices[devices[i].slice_index].skip_node_operations]
            m.per_node[node] = found
        return found

    def _rank(self, index: int) -> tuple:
        """A device's place among those a node sees: its pool's (pools with binding conditions last, then by driver
        and pool name, the node's own and network-attached ones alike), its slice's name, its place in the slice."""
        device = self.inventory.devices[index]
        s = self.inventory.slices[device.slice_index]
        return ((s.driver, s.pool) in self._waiting_pools, s.driver, s.pool, s.name, index)

    def _serves(self, index: int, node) -> bool:
        device = self.inventory.devices[index]
        s = self.inventory.slices[device.slice_index]
        if s.all_nodes or device.all_nodes:
            return True
        selector = device.node_selector if device.node_selector is not None else s.node_selector
        if selector is not None:
            return node_matches(selector, node)
        return False

    def derived(self, name: str, expression: str, index: int) -> Any:
        """A derived attribute's value on a device (memoised); CelEvaluationError as the scheduler words it."""
        key = (name, expression, index)
        if key not in self._derived:
            try:
                selector = compile_selector(expression, self.features.on("DRAConsumableCapacity"),
                                            self.features.on("DRAListTypeAttributes"), any_type=True)
            except CelCompileError as exc:
                raise ClaimError(f"derived attribute {name}: expression does not compile: {exc}") from None
            try:
                self._derived[key] = from_cel(selector.value(self.inventory.devices[index]))
            except (CelEvaluationError, ValueError) as exc:
                raise CelEvaluationError(f"evaluate derived attribute {name} on device {self.describe(index)} failed: {exc}") from None
        return self._derived[key]

    # ------------------------------------------------------------------------------- pools
    def node_pools(self, node: str) -> list[PoolState]:
        """The resource pools the allocator gathers for `node` (All mode refuses incomplete or invalid ones)."""
        found = self._node_pools.get(node)
        if found is None:
            info = self.inventory.by_name.get(node)
            keys = list(self._bound_pools.get(node, []))
            for s in self._floating_slices:
                serves = s.all_nodes or (s.node_selector is not None and info is not None and node_matches(s.node_selector, info))
                if serves and (s.driver, s.pool) not in keys:
                    keys.append((s.driver, s.pool))
            views = self.inventory.views
            found = self._node_pools[node] = [views.get((*k, node)) or self.inventory.pools[k] for k in keys]
        return found

    def pool_invalid(self, pool: PoolState) -> bool:
        """A device name repeated, or (with partitionable devices, as the 1.35+ allocator checks) bad counters."""
        return pool.invalid or bool(self.features.skips_unusable_pools and self.features.on("DRAPartitionableDevices")
                                    and pool.counter_problem)

    def invalid_on(self, node: str) -> str:
        """Why an invalid pool the allocator gathers for `node` is invalid ("" when none is): the 1.35+ allocator
        fails a node where nothing fits with this, so the pod is reported as an error, not as Pending."""
        if not self.features.skips_unusable_pools:
            return ""
        for pool in self.node_pools(node):
            if self.pool_invalid(pool):
                why = f"device '{pool.duplicate}' is published twice" if pool.duplicate else pool.counter_problem
                return f"resource pool {pool.driver}/{pool.name} is invalid ({why})"
        return ""

    def describe(self, index: int) -> str:
        device: Device = self.inventory.devices[index]
        s = self.inventory.slices[device.slice_index]
        return f"{s.driver}/{s.pool}/{device.name}"
