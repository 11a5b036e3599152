"""The ResourceSlices the NVIDIA DRA driver of a cluster's version would publish for its node pools.

Per node: one pool named after the node, holding the GPU plugin's slices (full GPUs, or the
pre-created MIG devices of a static layout with no full-GPU device, or with DynamicMIG, on every GPU the
driver partitions once the cluster's gate is on (ResolvedPool.dynamic_partitions), the full GPU (not on
an Ampere GPU in MIG mode) plus every possible MIG placement consuming the GPU's shared counters: in the devices' own slice on
1.34, in slices of their own on 1.35+, which allows nothing else) and, when compute domains are enabled, the compute-domain plugin's slice with its two
devices. Which attributes appear, and under which names, comes from the driver line's facts
(facts/data/dra_driver.yaml); host facts (PCI addresses, UUIDs) are synthetic but stable.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...cel import Quantity, Semver
from ...facts.catalog import GpuModel, MigProfile, host_defaults
from ...facts.driver import (
    AttributeFact,
    DriverLine,
    compute_domain_devices,
    device_attributes,
    device_capacities,
    dynamic_mig,
    gates_on,
    gpu_driver,
    static_mig_memory_slice,
    vfio_device_name,
)
from ...facts.mig import fit_mix
from ...facts.platform import SliceLayout, slice_layout, standard_attribute
from ...validate.resolved import ResolvedCluster, ResolvedPool
from ...validate.types import normalize_version
from .codec import decode_attribute, qualify
from .model import AttrValue, CounterUse, Device, Inventory, NodeInfo, RequestPolicy, ResourceSlice, build_inventory

GPU_DRIVER = gpu_driver()
SYNTHESIZED = "synthesized"


@dataclass(frozen=True)
class DriverSetup:
    """What the deployed chart runs, read from the compiled release values."""

    line: DriverLine
    gpus: bool  # resources.gpus.enabled: the GPU kubelet plugin publishes slices
    compute_domains: bool  # resources.computeDomains.enabled: the compute-domain plugin does
    gates: frozenset[str]  # driver feature gates that are on
    consumable_shares: str = ""  # consumableShares in effect: "memory", "unlimited", a number of shares, or ""


def driver_setup(line: DriverLine, values: dict[str, Any]) -> DriverSetup:
    resources = values.get("resources", {})
    gates = {name for name, g in gates_on(line).items() if g.default}
    for name, on in (values.get("featureGates") or {}).items():
        (gates.add if on is True else gates.discard)(name)
    shares = str(values.get("consumableShares") or "") if "ConsumableShares" in gates else ""
    return DriverSetup(line, resources.get("gpus", {}).get("enabled", True) is True,
                       resources.get("computeDomains", {}).get("enabled", True) is True, frozenset(gates),
                       "" if shares == "disabled" else shares)


MIB = 1 << 20


def shared_capacity(mode: str, capacity: dict[str, dict[str, Quantity]]
                    ) -> tuple[dict[str, dict[str, Quantity]], dict[str, dict[str, RequestPolicy]]] | None:
    """What a GPU or MIG device publishes with consumable shares on (demo/specs/consumable-shares/README.md
    of driver 0.5; applyConsumableShares, cmd/gpu-kubelet-plugin/consumable_shares.go at main): allowMultipleAllocations,
    and a request policy on `memory` whose valid range ends at the device's memory in every mode (the README leaves the
    maximum out; the code and the real plugin publish it: tests/real/test_real_kubelet_plugin.py), and a `shares`
    capacity for a number of shares. None when `mode` does not make devices shareable."""
    memory = capacity.get(GPU_DRIVER, {}).get("memory")
    if not mode or memory is None:
        return None
    total = Quantity.of_bytes(memory.bytes // MIB * MIB)
    step = Quantity.of_bytes(MIB)
    if mode == "memory":  # a claim without an amount takes the whole device
        policy = RequestPolicy(default=total, minimum=step, maximum=total, step=step)
    else:  # unlimited, or a number of shares: a claim without an amount takes no memory
        policy = RequestPolicy(default=Quantity(0), minimum=Quantity(0), maximum=total, step=step)
    capacities = {GPU_DRIVER: dict(capacity[GPU_DRIVER])}
    policies = {GPU_DRIVER: {"memory": policy}}
    if mode not in ("memory", "unlimited"):
        shares = int(mode)
        capacities[GPU_DRIVER]["shares"] = Quantity(shares)
        policies[GPU_DRIVER]["shares"] = RequestPolicy(default=Quantity(1), minimum=Quantity(1), maximum=Quantity(shares), step=Quantity(1))
    return capacities, policies


class _Gpu(NamedTuple):  # NamedTuple, not a frozen dataclass: built per GPU and device, and a third the cost
    index: int  # type: ignore[assignment]  # a field named like tuple.index, which it shadows
    uuid: str
    bus_id: str
    root: str
    numa: int | None  # None: the pool does not declare its hosts' NUMA nodes, or they report none
    partitions: dict[int, int]  # NVLink partition size -> partition id


@dataclass(frozen=True)
class _Host:
    model: GpuModel
    compute_capability: Semver
    driver_version: Semver
    cuda_version: Semver
    addressing_mode: str | None  # None: the pool does not declare it (nodePools[].host), so nothing is published
    setup: DriverSetup
    fabric: bool  # partition attributes are published (gate on, pool has an NVLink fabric)


class _Ctx(NamedTuple):
    """One device being built: a full GPU or a MIG device on `gpu`."""

    host: _Host
    gpu: _Gpu
    type: str
    uuid: str | None
    index: int  # type: ignore[assignment]  # a field named like tuple.index, which it shadows
    profile: str | None = None


def _partition(size: int) -> Callable[[_Ctx], AttrValue | None]:
    return lambda c: c.gpu.partitions.get(size) if c.host.fabric else None


# Where each published attribute's value comes from; the driver facts decide which names a line publishes.
_VALUES: dict[str, Callable[[_Ctx], AttrValue | None]] = {
    "type": lambda c: c.type,
    "uuid": lambda c: c.uuid,
    "minor": lambda c: c.gpu.index,
    "index": lambda c: c.index,
    "parentIndex": lambda c: c.gpu.index,
    "parentUUID": lambda c: c.gpu.uuid,
    "profile": lambda c: c.profile,
    "productName": lambda c: c.host.model.product_name,
    "brand": lambda c: c.host.model.brand,
    "architecture": lambda c: c.host.model.architecture,
    "cudaComputeCapability": lambda c: c.host.compute_capability,
    "driverVersion": lambda c: c.host.driver_version,
    "cudaDriverVersion": lambda c: c.host.cuda_version,
    "pcieBusID": lambda c: c.gpu.bus_id,
    "resource.kubernetes.io/pciBusID": lambda c: c.gpu.bus_id,
    "resource.kubernetes.io/pcieRoot": lambda c: c.gpu.root,
    "addressingMode": lambda c: c.host.addressing_mode,
    "resource.kubernetes.io/numaNode": lambda c: c.gpu.numa,
    "gpuModuleID": lambda c: c.gpu.index + 1 if c.host.fabric else None,
    "partition1": _partition(1),
    "partition2": _partition(2),
    "partition4": _partition(4),
    "partition8": _partition(8),
    "deviceID": lambda c: c.host.model.pci_device_ids[0].lower() if c.host.model.pci_device_ids else None,
    "vendorID": lambda c: VENDOR_ID,
    "numa": lambda c: c.gpu.numa,
    "iommuFDEnabled": lambda c: False,
}
VENDOR_ID = "0x10de"  # NVIDIA's PCI vendor id, as the driver formats it (fmt "0x%04x")
# The attributes whose values differ between the nodes of one pool. Every other _VALUES entry depends
# only on the pool and the device's place on its node, which lets _Builder compute those once per pool.
_PER_NODE = frozenset({"uuid", "parentUUID"})  # a vfio device's uuid comes from the same source as the GPU's
_PER_NODE_SOURCES = frozenset(_VALUES[name] for name in _PER_NODE)
_VARYING = frozenset(qualify(name, GPU_DRIVER) for name in _PER_NODE)  # Inventory.varying of a synthesized inventory


def _stable_uuid(*parts: object) -> str:
    """str(uuid.UUID(bytes=sha256(parts)[:16], version=4)), formatted directly: one per GPU and MIG
    device, and uuid.UUID's validation doubled the cost."""
    raw = bytearray(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def partition_ids(gpus: int) -> dict[int, dict[int, int]]:
    """GPU index -> {partition size: partition id}, numbered like Fabric Manager's default table for an
    HGX baseboard: the whole board is id 0, then the halves, the pairs, the single GPUs."""
    table: dict[int, dict[int, int]] = {i: {} for i in range(gpus)}
    base, size = 0, gpus
    while size >= 1:
        for i in range(gpus):
            table[i][size] = base + i // size
        base += gpus // size
        size //= 2
    return table


Plan = list[tuple[Callable[[_Ctx], AttrValue | None], str, str]]


def _attribute_plan(facts: dict[str, AttributeFact], gates: frozenset[str]) -> Plan:
    """(value source, domain, name) of each attribute a device type publishes with these gates, resolved once per pool."""
    plan = []
    for name, fact in facts.items():
        if (not fact.when or fact.when in gates) and fact.unless not in gates:
            domain, ident = qualify(name, GPU_DRIVER)
            plan.append((_VALUES[name], domain, ident))
    return plan


def _per_node(plan: Plan) -> Plan:
    """The entries of `plan` whose value differs from node to node (_PER_NODE)."""
    return [entry for entry in plan if entry[0] in _PER_NODE_SOURCES]


def _attributes(ctx: _Ctx, plan: Plan) -> dict[str, dict[str, AttrValue]]:
    out: dict[str, dict[str, AttrValue]] = {}
    for source, domain, ident in plan:
        value = source(ctx)
        if value is not None:
            values = out.get(domain)
            if values is None:
                values = out[domain] = {}
            values[ident] = value
    return out


def _mig_name(line: DriverLine, gpu: int, profile: MigProfile, start: int) -> str:
    compact = profile.name.replace(".", "").replace("+", "-")
    return line.mig_device_name.format(parentMinor=gpu, giProfileId=profile.gi_profile_id, placementStart=start,
                                       placementSize=profile.memory_slices, profileCompact=compact)


def _profile_capacity(profile: MigProfile) -> dict[str, Quantity]:
    caps = {name: Quantity(value) for name, value in profile.capacities}
    caps["memory"] = Quantity.of_bytes(profile.memory_bytes)
    return {name: caps[name] for name in device_capacities("mig")}


class _Builder:
    """Devices of one node pool; all per-pool facts looked up once."""

    def __init__(self, cluster: ResolvedCluster, pool: ResolvedPool, setup: DriverSetup, templates: Iterator[int]) -> None:
        defaults = host_defaults()
        model = pool.gpu
        self.cluster, self.pool, self.setup = cluster, pool, setup
        self.host = _Host(
            model=model,
            compute_capability=Semver.parse(normalize_version(model.compute_capability)),
            driver_version=Semver.parse(normalize_version(pool.spec.driver_version or defaults["driverVersion"])),
            cuda_version=Semver.parse(normalize_version(defaults["cudaDriverVersion"])),
            addressing_mode=pool.spec.host.addressing_mode if pool.spec.host else None,
            setup=setup,
            fabric="FabricManagerPartitioning" in setup.gates and bool(pool.partitions),
        )
        self.gpu_facts = _attribute_plan(device_attributes(setup.line, "gpu"), setup.gates)
        self.mig_facts = _attribute_plan(device_attributes(setup.line, "mig"), setup.gates)
        # PassthroughSupport: every GPU without MIG devices is published a second time, for vfio-pci
        self.vfio_facts = (_attribute_plan(device_attributes(setup.line, "vfio"), setup.gates)
                           if "PassthroughSupport" in setup.gates else None)
        self.vfio_capacity = {GPU_DRIVER: {"addressableMemory": Quantity.of_bytes(model.memory_bytes)}}
        # device's place on a node -> its attributes on the first node, the plan entries that differ per node, its template
        self._templates: dict[tuple, tuple[dict[str, dict[str, AttrValue]], Plan, int]] = {}
        self._template_ids = templates
        count = pool.spec.gpu.count
        offered = set(pool.partitions)
        # A node may hold the GPUs of several pools (one per model): this pool's are numbered after the earlier ones'.
        self.offset = cluster.gpu_offset(pool)
        on_node = sum(p.spec.gpu.count for p in cluster.node_mates(pool))
        numa_nodes = pool.spec.host.numa_nodes if pool.spec.host else None
        # per GPU slot of a node, what every node of the pool has there: PCI address, root, NUMA node, partitions
        self._slots = [(defaults["pciBusIds"][self.offset + i], defaults["pcieRoots"][self.offset + i],
                        (self.offset + i) * numa_nodes // on_node if numa_nodes else None,
                        {size: pid for size, pid in ids.items() if size in offered})
                       for i, ids in partition_ids(count).items()]
        self._cluster_name = cluster.name
        self.full_capacity = {GPU_DRIVER: {"memory": Quantity.of_bytes(model.memory_bytes)}}
        placements = fit_mix(model.mig, dict(pool.mig_layout)).placements if pool.mig_layout and model.mig else ()
        self.static_layout = _static_layout(model, placements) if placements else []
        self.dynamic = pool.dynamic_partitions and model.mig is not None  # the cluster's gate, not only the pool's ask
        self.dynamic_facts = dynamic_mig()
        self.dynamic_layout = _dynamic_layout(model) if self.dynamic else ({}, (), [])

    def device(self, name: str, ctx: _Ctx, plan: Plan, place: tuple, capacity: dict[str, dict[str, Quantity]],
               consumes: tuple[CounterUse, ...] = ()) -> Device:
        """The device at `place` (its GPU and position there) on ctx's node.

        The nodes of a pool are identical but for their UUIDs, so the attributes are computed for the
        first node and copied, UUIDs replaced, for the others: a tenth of the cost at thousands of GPUs.
        The copies share a template number, which lets a selector that reads no UUID be evaluated once
        for all of them (inventory.selection).
        """
        cached = self._templates.get(place)
        if cached is None:
            cached = self._templates[place] = (_attributes(ctx, plan), _per_node(plan), next(self._template_ids))
        template, per_node, number = cached
        attributes = {domain: dict(values) for domain, values in template.items()}
        for source, domain, ident in per_node:
            value = source(ctx)
            if value is not None:
                attributes[domain][ident] = value
        shared = shared_capacity(self.setup.consumable_shares, capacity) if not consumes else None
        if shared is not None:  # not with DynamicMIG's counters: a device shares its capacity, not its counter set
            return Device(name, GPU_DRIVER, attributes, shared[0], consumes, template=number, multi=True, policies=shared[1])
        return Device(name, GPU_DRIVER, attributes, capacity, consumes, template=number)

    def gpu(self, node: str, i: int) -> _Gpu:
        bus_id, root, numa, parts = self._slots[i]
        index = self.offset + i  # the GPU's minor on its node
        return _Gpu(index, "GPU-" + _stable_uuid(self._cluster_name, node, index), bus_id, root, numa, parts)

    def groups(self, node: str) -> list[tuple[list[Device], dict[str, dict[str, Quantity]]]]:
        """Per GPU: its devices and the counter sets they consume."""
        out = []
        for i in range(self.pool.spec.gpu.count):
            gpu = self.gpu(node, i)
            if self.dynamic:
                out.append(self._dynamic(gpu))
            elif self.static_layout:
                out.append((self._static_mig(gpu), {}))
            else:
                ctx = _Ctx(self.host, gpu, "gpu", gpu.uuid, gpu.index)
                devices = [self.device(f"gpu-{gpu.index}", ctx, self.gpu_facts, ("gpu", i), self.full_capacity)]
                if self.vfio_facts is not None:
                    vfio = _Ctx(self.host, gpu, "vfio", _stable_uuid(gpu.bus_id, node, "vfio"), gpu.index)
                    devices.append(self.device(vfio_device_name(gpu.index), vfio, self.vfio_facts, ("vfio", i), self.vfio_capacity))
                out.append((devices, {}))
        return out

    def _static_mig(self, gpu: _Gpu) -> list[Device]:
        devices = []
        for n, (profile, start, capacity) in enumerate(self.static_layout):
            ctx = _Ctx(self.host, gpu, "mig", "MIG-" + _stable_uuid(gpu.uuid, profile.name, start), n, profile.name)
            devices.append(self.device(_mig_name(self.setup.line, gpu.index, profile, start), ctx, self.mig_facts,
                                       ("mig", gpu.index, n), capacity))
        return devices

    def _dynamic(self, gpu: _Gpu) -> tuple[list[Device], dict[str, dict[str, Quantity]]]:
        counter_set = self.dynamic_facts.counter_set.format(minor=gpu.index)
        full_capacity, totals, placements = self.dynamic_layout
        ctx = _Ctx(self.host, gpu, "gpu", gpu.uuid, gpu.index)
        devices = [self.device(f"gpu-{gpu.index}", ctx, self.gpu_facts, ("gpu", gpu.index), full_capacity,
                               (CounterUse(counter_set, totals),))] if self.pool.dynamic_full_gpu else []
        for n, (profile, start, capacity, use) in enumerate(placements):
            # A placement is not a MIG device yet: it has no MIG UUID until a claim creates it.
            mig = _Ctx(self.host, gpu, "mig", None, gpu.index, profile.name)
            devices.append(self.device(_mig_name(self.setup.line, gpu.index, profile, start), mig, self.mig_facts,
                                       ("placement", gpu.index, n), capacity, (CounterUse(counter_set, use),)))
        return devices, {counter_set: dict(totals)}


def _static_layout(model: GpuModel, placements: tuple[tuple[str, int], ...]) -> list[tuple[MigProfile, int, dict]]:
    """Per pre-created MIG instance: profile, start, and its capacities (shared by every GPU with this layout)."""
    assert model.mig is not None
    slice_name = static_mig_memory_slice()
    layout = []
    for name, start in placements:
        profile = model.mig.profiles[name]
        caps = _profile_capacity(profile)
        caps.update({slice_name.format(i=s): Quantity(1) for s in range(start, start + profile.memory_slices)})
        layout.append((profile, start, {GPU_DRIVER: caps}))
    return layout


def _dynamic_layout(model: GpuModel) -> tuple[dict, tuple[tuple[str, Quantity], ...], list[tuple[MigProfile, int, dict, tuple]]]:
    """DynamicMIG per GPU: the full device's capacities, the counter set's values, and every placement with the
    counters it consumes. Identical for every GPU of a model, so built once per pool."""
    assert model.mig is not None
    facts = dynamic_mig()
    profiles = list(model.mig.profiles.values())
    full = {name: max((_profile_capacity(p)[name] for p in profiles), key=lambda q: q.value)
            for name in device_capacities("gpuDynamicMig")}
    totals = {facts.counters[name]: q for name, q in full.items() if name in facts.counters}
    totals.update({facts.memory_slice_counter.format(i=s): Quantity(1) for s in range(model.mig.memory_slices)})
    placements = []
    for profile in profiles:
        caps = _profile_capacity(profile)
        for start in profile.placements:
            use = {facts.counters[name]: q for name, q in caps.items() if name in facts.counters}
            use.update({facts.memory_slice_counter.format(i=s): Quantity(1) for s in range(start, start + profile.memory_slices)})
            placements.append((profile, start, {GPU_DRIVER: caps}, tuple(use.items())))
    return {GPU_DRIVER: full}, tuple(totals.items()), placements


Group = tuple[list[Device], dict[str, dict[str, Quantity]]]  # one GPU's devices and the counter sets they consume


Packing = list[tuple[str, list[int], list[int]]]  # per slice: name template, device positions, counter-set positions


def _flat(groups: list[Group]) -> tuple[list[Device], list[tuple[str, dict[str, Quantity]]]]:
    return [d for g in groups for d in g[0]], [item for g in groups for item in g[1].items()]


def _packing(groups: list[Group], layout: SliceLayout) -> Packing:
    """How a node's GPU devices and counter sets fall into the slices of its pool, within the limits of the
    cluster's Kubernetes version, as positions in _flat(groups): the same for every node of a node pool."""
    packed = _pack_separate(groups, layout) if layout.separate_counters else _pack_together(groups, layout)
    devices, sets = _flat(groups)
    device_at = {id(d): i for i, d in enumerate(devices)}
    set_at = {name: i for i, (name, _) in enumerate(sets)}
    return [(name, [device_at[id(d)] for d in devs], [set_at[n] for n in chunk_sets]) for name, devs, chunk_sets in packed]


def _pack(node: str, groups: list[Group], packing: Packing) -> list[ResourceSlice]:
    """A node's GPU devices as the slices of one pool (`packing` from the pool's first node)."""
    devices, sets = _flat(groups)
    return [ResourceSlice(name.format(node=node, driver=GPU_DRIVER), GPU_DRIVER, node, 1, len(packing),
                          [devices[i] for i in device_positions], node_name=node,
                          shared_counters=dict(sets[i] for i in set_positions))
            for name, device_positions, set_positions in packing]


def _fill(items: list, size: Callable[[Any], tuple[int, ...]], caps: tuple[int | None, ...]) -> list[list]:
    """Greedy chunks of `items` in order, each within `caps` (None: unlimited) summed over `size`."""
    chunks: list[list] = []
    used: tuple[int, ...] = ()
    for item in items:
        add = size(item)
        if chunks and all(c is None or u + a <= c for u, a, c in zip(used, add, caps)):
            chunks[-1].append(item)
            used = tuple(u + a for u, a in zip(used, add))
        else:
            chunks.append([item])
            used = add
    return chunks


def _pack_together(groups: list[Group], layout: SliceLayout) -> list[tuple[str, list[Device], dict]]:
    """1.34: each GPU's counter sets in the slice of the devices consuming them, never split from them."""
    caps = (layout.devices, layout.shared_counters, layout.consumed_counters)
    chunks = _fill(groups, lambda g: (len(g[0]), sum(len(c) for c in g[1].values()),
                                      sum(len(u.counters) for d in g[0] for u in d.consumes)), caps)
    return [("{node}-{driver}-" + str(k), [d for g in chunk for d in g[0]], {n: c for g in chunk for n, c in g[1].items()})
            for k, chunk in enumerate(chunks)]


def _pack_separate(groups: list[Group], layout: SliceLayout) -> list[tuple[str, list[Device], dict]]:
    """1.35+: devices and counter sets in slices of their own within one pool (the allocator resolves a
    device's sets across its pool), a GPU's devices kept together where the device limit allows."""
    devices = [d for g in groups for d in g[0]]
    limit = layout.devices_with_counters if any(d.consumes for d in devices) else layout.devices
    per_gpu = max((len(g[0]) for g in groups), default=0)
    if per_gpu <= limit:
        device_chunks = [[d for g in chunk for d in g[0]] for chunk in _fill(groups, lambda g: (len(g[0]),), (limit,))]
    else:
        device_chunks = [devices[k:k + limit] for k in range(0, len(devices), limit)]
    sets = [item for g in groups for item in g[1].items()]
    set_chunks = _fill(sets, lambda item: (1,), (layout.counter_sets,)) if sets else []
    return ([("{node}-{driver}-" + str(k), chunk, {}) for k, chunk in enumerate(device_chunks)]
            + [("{node}-{driver}-counters-" + str(k), [], dict(chunk)) for k, chunk in enumerate(set_chunks)])


CdDevices = list[tuple[str, dict[str, dict[str, AttrValue]], int]]  # name, attributes, template


def _compute_domain_devices(templates: Iterator[int]) -> tuple[str, CdDevices]:
    """The compute-domain plugin's devices, alike on every node: decoded once per cluster, one template
    each, and their attribute maps shared by every node's devices (nothing writes to a device's attributes)."""
    driver, devices = compute_domain_devices()
    return driver, [(name, {driver: {k: decode_attribute(v) for k, v in attrs.items()}}, next(templates))
                    for name, attrs in devices.items()]


def _alike_slice(node: str, driver: str, devices: CdDevices) -> ResourceSlice:
    """One node's slice of devices alike on every node (the compute-domain plugin's, a NIC driver's)."""
    return ResourceSlice(f"{node}-{driver}-0", driver, node, 1, 1,
                         [Device(name, driver, attrs, {}, template=number) for name, attrs, number in devices], node_name=node)


def _nic_devices(pool: ResolvedPool, templates: Iterator[int]) -> tuple[str, CdDevices]:
    """A pool's NICs (another driver's devices) as that driver would publish them: NIC i on the PCIe root of
    GPU i x gpus/nics, the standard attribute a claim aligns GPU and NIC on, and the attributes the pool says
    the driver publishes (in the driver's domain); alike on every node."""
    nics = pool.spec.nics
    assert nics is not None
    roots = host_defaults()["pcieRoots"]
    gpus = pool.spec.gpu.count
    domain, _, name = standard_attribute("pcieRoot").rpartition("/")
    own = {nics.driver: dict(nics.attributes)} if nics.attributes else {}
    return nics.driver, [(f"nic-{i}", {domain: {name: roots[i * gpus // nics.count]}, **own}, next(templates))
                         for i in range(nics.count)]


def node_names(pool: ResolvedPool) -> list[str]:
    """A pool's `nodeNames`, or `<pool>-<i>`."""
    return list(pool.spec.node_names) if pool.spec.node_names else [f"{pool.name}-{i}" for i in range(pool.spec.nodes)]


def synthesize(cluster: ResolvedCluster, chart_values: dict[str, Any],
               node_labels: dict[str, dict[str, str]] | None = None) -> Inventory:
    """The cluster's inventory as its DRA driver (configured by `chart_values`) would publish it."""
    setup = driver_setup(cluster.driver, chart_values)
    layout = slice_layout(cluster.api.kubernetes)
    slices: list[ResourceSlice] = []
    nodes: list[NodeInfo] = []
    templates = itertools.count()
    cd_driver, cd_devices = _compute_domain_devices(templates) if setup.compute_domains else ("", [])
    for pool in cluster.dra_pools if cluster.driver_runs else ():
        mates = cluster.node_mates(pool)
        if mates[0] is not pool:
            continue  # its nodes were built with the first pool on them: one driver pool per node holds every GPU
        builders = [_Builder(cluster, p, setup, templates) for p in mates] if setup.gpus else []
        merged: dict[str, str] = {}
        for p in mates:
            merged.update((node_labels or {}).get(p.name, {}))
        labels = tuple(sorted(merged.items()))
        packing: Packing | None = None
        nic_driver, nics = _nic_devices(pool, templates) if pool.spec.nics is not None else ("", [])
        for node in node_names(pool):
            nodes.append(NodeInfo(node, pool.name, labels, tuple(p.name for p in mates[1:])))
            if builders:
                groups = [g for b in builders for g in b.groups(node)]
                if packing is None:
                    packing = _packing(groups, layout)
                slices.extend(_pack(node, groups, packing))
            if setup.compute_domains:
                slices.append(_alike_slice(node, cd_driver, cd_devices))
            if nics:
                slices.append(_alike_slice(node, nic_driver, nics))
    return build_inventory(cluster.name, SYNTHESIZED, cluster.api.api_version, slices, nodes, varying=_VARYING)
