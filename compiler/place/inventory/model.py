"""The device inventory of a cluster: ResourceSlices, their devices, and the nodes they sit on.

One representation serves both sources (slices gpuc synthesizes from the intents, and slices a
user exports from a real cluster), so the allocator never knows which it got. Attribute and
capacity names are stored qualified by domain, as CEL sees them; the driver's own domain is
dropped again only when slices are written out.

Order is part of the contract (the allocator's device order, documented in the report): nodes in
the cluster's pool order then node order, and on each node the resource pools by (driver, pool
name), slices by name, devices in slice order. `Inventory.devices[i].index == i` in that order.
Devices not bound to one node (node-selected, network-attached) come after the nodes'; the allocator
merges them into a node's own by pool name, as the scheduler does (allocator/candidates.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...cel import AttrList, Quantity, Semver
from ...diagnostics import Diagnostic

AttrValue = bool | int | str | Semver | AttrList


@dataclass(frozen=True, slots=True)
class CounterUse:
    counter_set: str
    counters: tuple[tuple[str, Quantity], ...]
    # compatibilityGroups (DRADeviceCompatibilityGroups): devices drawing from one counter set are allocated
    # together only when their groups intersect (MIG vs vGPU partitions of one GPU)
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """How a request consumes a capacity of a device that allows multiple allocations (KEP-5075):
    `default` when the request names no amount, else the amount rounded up into `valid_range`
    (min, max, step) or to the next of `valid_values`."""

    default: Quantity | None = None
    minimum: Quantity | None = None
    maximum: Quantity | None = None
    step: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()


@dataclass(eq=False, slots=True)
class Device:
    name: str
    driver: str
    attributes: dict[str, dict[str, AttrValue]]  # domain -> name -> value
    capacity: dict[str, dict[str, Quantity]]  # domain -> name -> quantity
    consumes: tuple[CounterUse, ...] = ()
    binding_conditions: bool = False  # needs DRADeviceBindingConditions (alpha): never selectable in 1.34 defaults
    node_name: str | None = None  # per-device node selection (perDeviceNodeSelection slices)
    all_nodes: bool = False
    node_selector: dict | None = None
    index: int = -1  # position in Inventory.devices
    slice_index: int = -1  # position in Inventory.slices
    # Devices with the same template (>= 0) publish the same driver, capacity and attributes except those
    # Inventory.varying names: a synthesized pool's device at one place on each of its nodes. -1: unknown.
    template: int = -1
    multi: bool = False  # allowMultipleAllocations: several claims share it while its capacity lasts
    policies: dict[str, dict[str, RequestPolicy]] | None = None  # domain -> capacity name -> its request policy
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect): DRADeviceTaints

    def attribute(self, qualified: str) -> AttrValue | None:
        domain, _, name = qualified.rpartition("/")
        return self.attributes.get(domain or self.driver, {}).get(name)


@dataclass(eq=False, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: list[Device]
    node_name: str | None = None
    all_nodes: bool = False
    node_selector: dict | None = None
    per_device_node_selection: bool = False
    shared_counters: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    # skipNodeOperations (DRAOptionalNodeOperations): node-local gRPC calls the kubelet skips for these devices;
    # the scheduler then allocates them only on nodes that declare the feature
    skip_node_operations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    pool: str | None  # the gpuc node pool it belongs to, when known
    labels: tuple[tuple[str, str], ...] = ()
    also: tuple[str, ...] = ()  # further node pools on the same node (one per GPU model of a node that holds several)
    declared: tuple[str, ...] = ()  # status.declaredFeatures (KEP-5328): what the node's kubelet supports

    def in_pool(self, name: str) -> bool:
        return self.pool == name or name in self.also


@dataclass(frozen=True, slots=True)
class PoolState:
    """A DRA resource pool (driver, pool name) at its newest generation."""

    driver: str
    name: str
    generation: int
    slices: int
    expected: int
    duplicate: str = ""  # a device name that repeats across the pool's slices: the pool is invalid
    counter_problem: str = ""  # a counter set named twice, or consumed counters the pool does not define
    grouped: bool = False  # a device declares compatibilityGroups: without the gate the scheduler skips the pool

    @property
    def incomplete(self) -> bool:
        return self.slices != self.expected

    @property
    def invalid(self) -> bool:
        return bool(self.duplicate)


@dataclass
class Inventory:
    cluster: str
    source: str  # "synthesized" or the file the slices came from
    api_version: str
    nodes: tuple[NodeInfo, ...]
    slices: tuple[ResourceSlice, ...]
    devices: tuple[Device, ...]
    pools: dict[tuple[str, str], PoolState]
    warnings: tuple[Diagnostic, ...] = ()
    varying: frozenset[tuple[str, str]] = frozenset()  # (domain, name) of attributes that differ within a template
    # (driver, pool, node) -> the pool as that node sees it, when the node's own slices are a complete older
    # generation of a pool whose newer generation is on other nodes: the allocator takes the newest generation
    # among the slices that target the node, and uses it while it is complete (a pool moving between nodes)
    views: dict[tuple[str, str, str], PoolState] = field(default_factory=dict)
    # device -> the other devices of the same (driver, pool, name) in other views: one device to the scheduler,
    # whose allocated state is by device ID, so allocating one allocates them all
    aliases: dict[int, tuple[int, ...]] = field(init=False, repr=False, default_factory=dict)
    by_name: dict[str, NodeInfo] = field(init=False, repr=False)
    # (driver, pool) -> counter set -> counters, over the pool's current slices: 1.35 keeps counter sets in
    # slices of their own, so a device's counters are looked up in its pool, never only in its slice.
    counter_sets: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = field(init=False, repr=False)
    # (selector text, device positions) -> the selection.select result, shared by the checks and the planner
    selections: dict[tuple[str, tuple[int, ...]], tuple[tuple[int, ...], dict[int, str]]] = field(
        init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.counter_sets = pool_counter_sets(self.slices)
        if self.views:
            same: dict[tuple[str, str, str], list[int]] = {}
            for d in self.devices:
                s = self.slices[d.slice_index]
                same.setdefault((s.driver, s.pool, d.name), []).append(d.index)
            self.aliases = {i: tuple(j for j in group if j != i) for group in same.values() if len(group) > 1 for i in group}

    def pool_of(self, device: Device) -> tuple[str, str]:
        s = self.slices[device.slice_index]
        return (s.driver, s.pool)

    def pool_key(self, device: Device) -> tuple[str, ...]:
        """The key of the pool state the device belongs to: its node's view, or the pool's (`states`)."""
        s = self.slices[device.slice_index]
        if self.views and s.node_name is not None and (s.driver, s.pool, s.node_name) in self.views:
            return (s.driver, s.pool, s.node_name)
        return (s.driver, s.pool)

    def states(self) -> dict[tuple[str, ...], PoolState]:
        """Every pool state: the pools at their newest generation and the nodes' views of older ones."""
        out: dict[tuple[str, ...], PoolState] = {}
        for states in (self.pools, self.views):
            out.update(states.items())
        return out


def pool_counter_sets(slices: tuple[ResourceSlice, ...] | list[ResourceSlice]) -> dict[tuple[str, str], dict[str, dict[str, Quantity]]]:
    """Counter sets per resource pool (names are unique in a pool; the first definition wins)."""
    out: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = {}
    for s in slices:
        if s.shared_counters:
            sets = out.setdefault((s.driver, s.pool), {})
            for name, counters in s.shared_counters.items():
                sets.setdefault(name, counters)
    return out


def _counter_problem(members: list[ResourceSlice]) -> str:
    """Why a pool's counters make it invalid for an allocator with partitionable devices, or "": a set
    defined twice, or a device consuming a set or counter no slice of the pool defines."""
    sets: dict[str, dict] = {}
    for s in members:
        for name, counters in s.shared_counters.items():
            if name in sets:
                return f"counter set '{name}' is defined twice"
            sets[name] = counters
    for s in members:
        for d in s.devices:
            for use in d.consumes:
                if use.counter_set not in sets:
                    return f"device '{d.name}' consumes counter set '{use.counter_set}', which the pool does not define"
                unknown = [n for n, _ in use.counters if n not in sets[use.counter_set]]
                if unknown:
                    return f"device '{d.name}' consumes counter '{unknown[0]}', which set '{use.counter_set}' does not define"
    return ""


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """node-9 before node-10."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def build_inventory(cluster: str, source: str, api_version: str, slices: list[ResourceSlice], nodes: list[NodeInfo],
                    warnings: list[Diagnostic] | None = None, varying: frozenset[tuple[str, str]] = frozenset()) -> Inventory:
    """Keep each pool's newest generation, judge completeness, fix the documented order, index devices."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    current = [s for s in slices if s.generation == newest[(s.driver, s.pool)]]
    grouped: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in current:
        grouped.setdefault((s.driver, s.pool), []).append(s)
    pools = {key: _pool_state(key, newest[key], grouped[key]) for key in sorted(newest)}
    views = _stale_views(slices, newest)
    for members in views.values():
        current.extend(members)
    rank = {n.name: i for i, n in enumerate(nodes)}
    last = len(nodes)
    current.sort(key=lambda s: (rank.get(s.node_name or "", last), s.driver, s.pool, s.name))
    devices: list[Device] = []
    for si, s in enumerate(current):
        for d in s.devices:
            d.index = len(devices)
            d.slice_index = si
            devices.append(d)
    return Inventory(cluster, source, api_version, tuple(nodes), tuple(current), tuple(devices), pools, tuple(warnings or ()), varying,
                     {key: _pool_state(key[:2], members[0].generation, members) for key, members in views.items()})


def _pool_state(key: tuple[str, str], generation: int, members: list[ResourceSlice]) -> PoolState:
    seen: set[str] = set()
    duplicate = ""
    for s in members:
        for d in s.devices:
            if d.name in seen and not duplicate:
                duplicate = d.name
            seen.add(d.name)
    return PoolState(key[0], key[1], generation, len(members), members[0].slice_count, duplicate, _counter_problem(members),
                     any(use.groups for s in members for d in s.devices for use in d.consumes))


def _stale_views(slices: list[ResourceSlice], newest: dict[tuple[str, str], int]) -> dict[tuple[str, str, str], list[ResourceSlice]]:
    """Per (driver, pool, node): the node's own slices of a pool whose newest generation is elsewhere, when they
    are a complete older generation. The allocator gathers for a node only the slices that target it and keeps
    their newest generation: complete, it is used (the pool is moving to other nodes); incomplete, it is
    obsolete as soon as any slice of the pool is newer, which is what keeping the newest across nodes gives.
    Only pools whose slices all name their node: a node-selected slice would join every matching node's view."""
    floating = {(s.driver, s.pool) for s in slices if s.node_name is None}
    own: dict[tuple[str, str, str], list[ResourceSlice]] = {}
    for s in slices:
        key = (s.driver, s.pool)
        if s.node_name is None or key in floating or s.generation >= newest[key]:
            continue
        members = own.setdefault((s.driver, s.pool, s.node_name), [])
        if members and members[0].generation < s.generation:
            members.clear()
        if not members or members[0].generation == s.generation:
            members.append(s)
    current = {(s.driver, s.pool, s.node_name) for s in slices if s.node_name is not None
               and s.generation == newest[(s.driver, s.pool)]}
    return {key: members for key, members in sorted(own.items())
            if key not in current and len(members) == members[0].slice_count}
