"""Who holds which GPU: a plan and its inventory folded into pools -> nodes -> physical GPUs -> slices.

The HTML capacity report draws this and the Markdown summary counts it. A physical GPU is the unit
people reason about, so MIG devices (static instances, or DynamicMIG placements) are grouped under
the GPU they are carved from, each covering its memory slices. Nodes whose GPUs are held in exactly
the same way are folded into one row, which keeps a 5,000-node pool readable. When even that leaves
more than DETAIL_ROWS distinct rows (thousands of small workloads, each on its own nodes), the rest
are folded by shape alone (which parts of which GPUs are held, not by whom): a coarser zoom level
that keeps the page small enough to open quickly, with the holders counted in the segment.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..cel.quantity import parse_quantity
from ..facts.driver import gpu_driver
from ..place.allocator import AllocationPlan
from ..place.inventory import Device

GPU_DRIVER = gpu_driver()
_SLICE = re.compile(r"^(?:memorySlice|memory-slice-)(\d+)$")
DETAIL_ROWS = 200  # distinct node rows drawn workload by workload; past this, rows fold by shape
MIB = 1024 * 1024


@dataclass(frozen=True)
class Holder:
    workload: str  # ns/name; "a + b" when a shared claim serves several workloads
    pod: str
    claim: str
    request: str
    device: str
    pods: tuple[str, ...] = ()  # every pod using the device through this claim (a shared claim: several)
    sharing: str = ""  # how those pods share it: TimeSlicing, MPS, Shared (the workload's gpu.sharing)
    memory: str = ""  # what a fractional claim takes of the GPU's memory ("16Gi of 46068Mi")


@dataclass
class Segment:
    """A part of one physical GPU: the whole GPU, or the memory slices one MIG device covers."""

    device: str
    label: str  # "H100 80GB" or a MIG profile
    start: int
    size: int
    holder: Holder | None = None
    held_by: Counter[str] | None = None  # in rows folded by shape: workload -> nodes on which it holds this part

    @property
    def held(self) -> bool:
        return self.holder is not None or bool(self.held_by)


@dataclass
class PhysicalGpu:
    key: str
    name: str  # the full-GPU device name, or the parent's name for MIG instances
    slices: int  # memory slices the drawing is divided into (1 for a GPU without MIG)
    segments: list[Segment] = field(default_factory=list)

    @property
    def used(self) -> bool:
        return any(s.held for s in self.segments)

    def signature(self) -> tuple:
        return (self.slices, tuple((s.label, s.start, s.size, s.holder.workload if s.holder else "") for s in self.segments))

    def shape(self) -> tuple:
        return (self.slices, tuple((s.label, s.start, s.size, s.holder is not None) for s in self.segments))


@dataclass
class NodeRow:
    nodes: list[str]  # nodes folded into this row (same holders on every GPU, or the same shape when by_shape)
    gpus: list[PhysicalGpu]
    by_shape: bool = False


@dataclass
class PoolMap:
    name: str
    allocation: str
    nodes: int
    gpus: int
    gpus_used: int
    devices: int
    devices_used: int
    rows: list[NodeRow]
    held: dict[str, tuple[int, int]] = field(default_factory=dict)  # workload -> (devices held, nodes), most first


@dataclass
class ClusterMap:
    plan: AllocationPlan
    pools: list[PoolMap]
    workloads: list[str]  # every workload holding a device, most devices first, then by name


MIN_HUE_GAP = 24  # degrees: closer hues read as one colour on a small square
GOLDEN_ANGLE = 137.508


def workload_color(workload: str, hue: float | None = None) -> str:
    """A colour from the workload's name: the same workload gets the same colour in every report unless
    its hue is taken by another workload of the same report (see workload_colors)."""
    digest = int(hashlib.sha256(workload.encode()).hexdigest()[:8], 16)
    return f"hsl({round(digest % 360 if hue is None else hue)}, {55 + digest // 360 % 25}%, {42 + digest // 9000 % 18}%)"


def _arc(h: float, t: float) -> float:
    return min(abs(h - t), 360 - abs(h - t))


def workload_colors(workloads: list[str]) -> dict[str, str]:
    """A colour per workload of one report, no two within MIN_HUE_GAP of hue while the wheel has room: each
    keeps its own hue when free, else steps by the golden angle to the first free one. Deterministic: the
    workloads are taken in name order.

    A report of thousands of workloads crowds the wheel after a few dozen, so the gaps are not found by
    comparing each hue with every hue taken (quadratic in the workloads, times 360): a candidate's nearest
    taken hue is one of its two neighbours on the sorted wheel, and each whole-degree hue keeps its distance
    to the nearest taken one as hues are taken. Both give exactly the values the direct comparison gives."""
    taken: list[float] = []  # sorted
    nearest = [360.0] * 360  # whole-degree hue -> its distance to the nearest taken hue

    def gap(h: float) -> float:
        if not taken:
            return 360.0
        i = bisect.bisect_left(taken, h)
        return min(_arc(h, taken[i % len(taken)]), _arc(h, taken[i - 1]))

    out = {}
    for w in sorted(set(workloads)):
        base = int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % 360
        tries = [(base + step * GOLDEN_ANGLE) % 360 for step in range(1 + 360 // MIN_HUE_GAP)]
        hue = next((h for h in tries if gap(h) >= MIN_HUE_GAP), None)
        if hue is None:  # the wheel is crowded: the hue farthest from every other
            hue = float(max(range(360), key=lambda h: (nearest[h], -h)))
        bisect.insort(taken, hue)
        nearest = [min(d, _arc(h, hue)) for h, d in enumerate(nearest)]
        out[w] = workload_color(w, hue)
    return out


def _slices(device: Device) -> list[int]:
    names = list(device.capacity.get(GPU_DRIVER, {}))
    for use in device.consumes:
        names += [n for n, _ in use.counters]
    return sorted(int(m.group(1)) for n in names if (m := _SLICE.match(n)))


def _gpu_key(device: Device) -> str:
    attrs = device.attributes.get(GPU_DRIVER, {})
    if device.consumes:
        return f"counters:{device.consumes[0].counter_set}"  # DynamicMIG: the GPU and its placements share a counter set
    if attrs.get("type") == "mig":
        return f"uuid:{attrs.get('parentUUID')}"
    return f"uuid:{attrs.get('uuid', device.name)}"


def _label(device: Device) -> str:
    attrs = device.attributes.get(GPU_DRIVER, {})
    if attrs.get("type") == "mig":
        return str(attrs.get("profile", "mig"))
    return str(attrs.get("productName", device.name)).removeprefix("NVIDIA ")


def _sharing(origin: Any) -> str:
    """The workload's gpu.sharing, read off its document (the plan keeps the intent it came from)."""
    gpu = ((getattr(origin, "value", None) or {}).get("spec") or {}).get("gpu") or {}
    return str(gpu.get("sharing") or "") if isinstance(gpu, dict) else ""


def _holders(plan: AllocationPlan) -> dict[tuple[str, str], list[Holder]]:
    """(pool, device name) -> who holds it (pool = the node, for node-local DRA pools): one holder per claim, which
    names every pod using it; several when claims share a device by capacity (fractional memory)."""
    held: dict[tuple[str, str], list[Holder]] = {}
    for pod in plan.pods:
        for claim in pod.claims:
            for d in claim.devices:
                if d.driver != GPU_DRIVER:
                    continue
                holders = held.setdefault((d.pool, d.device), [])
                known = next((h for h in holders if h.claim == claim.claim), None)
                if known is None:
                    memory = dict(d.consumed).get("memory", "")
                    holders.append(Holder(pod.workload, pod.pod, claim.claim, d.request, d.device, (pod.pod,), _sharing(pod.origin),
                                          memory))
                elif pod.pod not in known.pods:  # a shared claim: one device, several pods (and perhaps workloads)
                    names = " + ".join(sorted(set(known.workload.split(" + ")) | {pod.workload}))
                    holders[holders.index(known)] = dataclasses.replace(known, workload=names, pods=(*known.pods, pod.pod))
    return held


def _memory_segments(device: Device, holders: list[Holder]) -> tuple[int, list[Segment]] | None:
    """A GPU shared by capacity: one segment per claim, as wide as the memory it takes (MiB), or None when the
    claims name no amount."""
    total = device.capacity.get(GPU_DRIVER, {}).get("memory")
    if total is None or not holders or not all(h.memory for h in holders):
        return None
    size = max(1, total.bytes // MIB)
    of = "{h.memory} of " + f"{total.bytes / MIB / 1024:.1f} GiB"
    segments, start = [], 0
    for h in holders:
        taken = min(size - start, max(1, parse_quantity(h.memory).bytes // MIB))
        segments.append(Segment(device.name, "fractional", start, taken, dataclasses.replace(h, memory=of.format(h=h))))
        start += taken
    return size, segments


def _node_gpus(devices: list[Device], pool_of: dict[int, str], held: dict[tuple[str, str], list[Holder]]) -> list[PhysicalGpu]:
    gpus: dict[str, PhysicalGpu] = {}
    for device in devices:
        attrs = device.attributes.get(GPU_DRIVER, {})
        kind = attrs.get("type")
        if kind not in ("gpu", "mig"):
            continue
        key = _gpu_key(device)
        slices = _slices(device)
        gpu = gpus.get(key)
        if gpu is None:
            gpu = gpus[key] = PhysicalGpu(key, device.name.split("-mig-")[0], 1)
        holders = held.get((pool_of[device.index], device.name), [])
        holder = holders[0] if holders else None
        if kind == "gpu" and not device.consumes:
            shared = _memory_segments(device, holders) if device.multi else None
            if shared is not None:
                gpu.slices, gpu.segments = shared
            else:
                gpu.segments.append(Segment(device.name, _label(device), 0, 1, holder))
            continue
        if kind == "gpu":  # DynamicMIG: the whole GPU, as an alternative to its placements
            gpu.slices = max(gpu.slices, (slices[-1] + 1) if slices else 1)
            if holder is not None:
                gpu.segments.append(Segment(device.name, _label(device), 0, gpu.slices, holder))
            continue
        if slices:
            gpu.slices = max(gpu.slices, slices[-1] + 1)
            if holder is not None or not device.consumes:  # static instances always show; placements only when used
                gpu.segments.append(Segment(device.name, _label(device), slices[0], len(slices), holder))
    for gpu in gpus.values():
        gpu.segments.sort(key=lambda s: (s.start, s.device))
    return list(gpus.values())


def _fold_by_shape(rows: list[NodeRow]) -> list[NodeRow]:
    folded: dict[tuple, NodeRow] = {}
    for row in rows:
        shape = tuple(g.shape() for g in row.gpus)
        into = folded.get(shape)
        if into is None:
            gpus = [PhysicalGpu(g.key, g.name, g.slices, [
                Segment(s.device, s.label, s.start, s.size, None, Counter() if s.holder else None) for s in g.segments])
                for g in row.gpus]
            into = folded[shape] = NodeRow([], gpus, by_shape=True)
        into.nodes += row.nodes
        for mine, theirs in zip(into.gpus, row.gpus):
            for segment, source in zip(mine.segments, theirs.segments):
                if source.holder is not None and segment.held_by is not None:
                    segment.held_by[source.holder.workload] += len(row.nodes)
    return list(folded.values())


def _held(rows: list[NodeRow]) -> dict[str, tuple[int, int]]:
    devices: Counter[str] = Counter()
    nodes: Counter[str] = Counter()
    for row in rows:
        present: set[str] = set()
        for gpu in row.gpus:
            for s in gpu.segments:
                if s.holder is not None:
                    devices[s.holder.workload] += len(row.nodes)
                    present.add(s.holder.workload)
        for workload in present:
            nodes[workload] += len(row.nodes)
    return {w: (devices[w], nodes[w]) for w in sorted(devices, key=lambda w: (-devices[w], w))}


def cluster_map(plan: AllocationPlan) -> ClusterMap:
    inventory = plan.devices_of
    held = _holders(plan)
    pool_of = {d.index: inventory.slices[d.slice_index].pool for d in inventory.devices}
    node_devices: dict[str, list[Device]] = {}
    for d in inventory.devices:
        node = d.node_name or inventory.slices[d.slice_index].node_name
        if node is not None:
            node_devices.setdefault(node, []).append(d)
    pools: list[PoolMap] = []
    for usage in plan.pools:
        members = [n.name for n in inventory.nodes if (n.pool or "(unnamed)") == usage.pool or usage.pool in n.also]
        rows: dict[tuple, NodeRow] = {}
        for node in members:
            gpus = _node_gpus(node_devices.get(node, []), pool_of, held)
            signature = tuple(g.signature() for g in gpus)
            row = rows.get(signature)
            if row is None:
                rows[signature] = NodeRow([node], gpus)
            else:
                row.nodes.append(node)
        exact = list(rows.values())
        shown = exact if len(exact) <= DETAIL_ROWS else exact[:DETAIL_ROWS] + _fold_by_shape(exact[DETAIL_ROWS:])
        pools.append(PoolMap(usage.pool, usage.allocation, usage.nodes, usage.gpus, usage.gpus_used, usage.devices,
                             usage.devices_used, shown, _held(exact)))
    total: Counter[str] = Counter()
    for pool in pools:
        for workload, (devices, _) in pool.held.items():
            total[workload] += devices
    workloads = sorted(total, key=lambda w: (-total[w], w))
    return ClusterMap(plan, pools, workloads)
