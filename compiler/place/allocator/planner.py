"""Place every pod of a cluster, one at a time, with the structured allocator's per-pod semantics.

Pod order: pods needing more devices first, then pods whose claims carry matchAttribute
constraints, then workload order, replica and node rank (first-fit decreasing: large and
constrained pods get their pick before small ones fragment the nodes). Node order: the inventory's
(pool order then node order). Each pod goes to the first node where all of its unallocated claims
fit together; a pod referencing an already allocated shared claim can only go to that claim's node.

Allocation only ever grows during a plan, so a node that cannot hold a pod of some shape can never
hold a later pod of the same shape: each shape keeps a cursor past the nodes it failed on, which
keeps a plan of n pods on m nodes at O(n + m) node attempts per shape instead of O(n * m). Shapes
are many (every workload's claim spec is its own), so a coarser bound starts each pod further on:
for every (device set, count) a request option asks for, the first node that still has that many
free devices of the set (`FreeFrontier`); nodes before it fail the `_could_fit` test and are skipped.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable

from ...cel import Quantity
from ...facts.driver import gpu_driver
from ...facts.platform import standard_attribute
from ...validate.resolved import ResolvedCluster
from ..held import NO_USE, ClusterUse, RunningClaim
from ..inventory import Inventory
from ..inventory.codec import unqualify
from .candidates import DeviceIndex
from .features import ALL as ALL_FEATURES
from .features import AllocatorFeatures
from .pods import Pod, PodClaim
from .reasons import explain
from .requests import EXACT_COUNT, ClaimError, DeviceClass
from .result import AllocationPlan, PlacedClaim, PlacedDevice, PodOutcome, PoolUsage
from .search import AllocationError, allocate_on_node
from .state import AllocationState, ClaimResult, DeviceResult

Progress = Callable[[int, int], None]
GPU_DRIVER = gpu_driver()


def _quantity(device, domain: str, name: str, amount) -> Quantity:
    """An amount consumed of a capacity, written in the capacity's own format (binary for memory)."""
    return Quantity(amount, device.capacity[domain][name].format)


def placement_order(pods: list[Pod]) -> list[int]:
    """Indices of `pods` in the order they are placed (see module docstring)."""
    return sorted(range(len(pods)), key=lambda i: (-pods[i].devices, not pods[i].constrained, i))


def _placed(results: list[ClaimResult], index: DeviceIndex) -> tuple[PlacedClaim, ...]:
    inventory = index.inventory
    out = []
    for r in results:
        devices = []
        for picked in r.devices:
            device = inventory.devices[picked.device]
            s = inventory.slices[device.slice_index]
            consumed = tuple((unqualify(domain, name, device.driver), str(_quantity(device, domain, name, amount)))
                             for (domain, name), amount in sorted((picked.taken or {}).items()) if picked.asked)
            devices.append(PlacedDevice(picked.request, s.driver, s.pool, device.name, picked.admin, consumed))
        out.append(PlacedClaim(r.claim.key, r.claim.label, r.claim.source, r.claim.shared, tuple(devices)))
    return tuple(out)


class Planner:
    def __init__(self, inventory: Inventory, classes: dict[str, DeviceClass], record_devices: bool = True,
                 features: AllocatorFeatures = ALL_FEATURES) -> None:
        self.inventory = inventory
        self.features = features
        self.shareable = any(d.multi for d in inventory.devices)
        self.record_devices = record_devices  # the devices each placed pod got (False: only where it went)
        self.index = DeviceIndex(inventory, classes, features)
        self.state = AllocationState(inventory)
        self.nodes = [n.name for n in inventory.nodes]
        self._cursor: dict[tuple, int] = {}
        self._why: dict[tuple, str] = {}
        self.frontier = FreeFrontier(self.nodes, self.index, self.state)

    def place(self, pod: Pod) -> PodOutcome:
        broken = next((c for c in pod.claims if c.spec is None), None)
        if broken is not None:
            return self._failed(pod, broken.error, error=True)
        pinned = {self.state.pinned[c.key].node for c in pod.claims if c.shared and c.key in self.state.pinned}
        todo = [c for c in pod.claims if not (c.shared and c.key in self.state.pinned)]
        if len(pinned) > 1:
            return self._failed(pod, f"its shared claims are allocated on different nodes ({', '.join(sorted(pinned))})")
        done = [self.state.pinned[c.key] for c in pod.claims if c.shared and c.key in self.state.pinned]
        if not todo:
            return self._outcome(pod, next(iter(pinned)), done)
        shape = tuple(_shape(c) for c in todo)
        start = 0 if pinned else max(self._cursor.get(shape, 0), 0 if self.shareable else self.frontier.first_fit(todo))
        candidates = sorted(pinned) if pinned else self.nodes[start:]
        # Devices that allow multiple allocations hold several requests each: no count of free devices bounds them.
        needed = 0 if self.shareable else _free_devices_needed(todo)
        ranked = _has_alternatives(todo)
        best: tuple[int, str, list[ClaimResult]] | None = None
        try:
            for node in candidates:
                if self.state.free_on(node) < needed or not (self.shareable or self._could_fit(todo, node)):
                    results = None  # not enough free devices, or too few of the right kind: no search can succeed
                else:
                    results = allocate_on_node(node, todo, self.index, self.state)
                if results is not None:
                    if not ranked:
                        self.state.commit(results, pod.workload)
                        return self._outcome(pod, node, done + results)
                    # firstAvailable: the scheduler scores nodes by the alternatives they satisfy (KEP-4816 beta),
                    # so the first node where the most preferred ones fit wins, not the first node that fits
                    rank = _alternative_rank(results)
                    if best is None or rank < best[0]:
                        best = (rank, node, results)
                    if rank == 0:
                        break
                elif not pinned and best is None:
                    start += 1
                    self._cursor[shape] = start
        except (AllocationError, ClaimError) as exc:
            return self._failed(pod, str(exc), error=True)
        if best is not None:
            self.state.commit(best[2], pod.workload)
            return self._outcome(pod, best[1], done + best[2])
        invalid = next((why for node in (sorted(pinned) if pinned else self.nodes) if (why := self.index.invalid_on(node))), "") \
            if self.index.any_invalid else ""
        if invalid:
            return self._failed(pod, f"invalid resource pools were encountered: {invalid}; the scheduler fails the pod when "
                                     "it fits no node and an invalid pool was seen (the driver must republish the pool)", error=True)
        if pinned:
            node = next(iter(pinned))
            return self._failed(pod, f"it must run on node {node}, where its shared claim is allocated, but "
                                     + explain(pod.workload.split("/")[-1], todo, [node], self.index, self.state))
        if shape not in self._why:  # worded once per shape, with a placeholder for the workload's name
            self._why[shape] = explain(_WHO, todo, self.nodes, self.index, self.state)
        return self._failed(pod, self._why[shape].replace(_WHO, pod.workload.split("/")[-1]))

    def _could_fit(self, claims: list[PodClaim], node: str) -> bool:
        """A cheap necessary condition: every ExactCount request has an option with enough free candidates
        on the node. Most nodes a pod cannot use (another GPU model, full) fail here without a search."""
        in_use = self.state.in_use
        for claim in claims:
            for request in claim.spec.requests:  # type: ignore[union-attr]
                for option in request.options:
                    if option.mode != EXACT_COUNT or option.admin_access:
                        break  # All mode and admin access are judged by the search itself
                    if _has_free(self.index.candidates(option, node), in_use, option.count):
                        break
                else:
                    return False
        return True

    def _outcome(self, pod: Pod, node: str, results: list[ClaimResult]) -> PodOutcome:
        if not self.record_devices:
            return PodOutcome(pod.workload, pod.name, pod.replica, pod.rank, node, origin=pod.origin)
        order = {c.key: i for i, c in enumerate(pod.claims)}
        results = sorted(results, key=lambda r: order[r.claim.key])
        return PodOutcome(pod.workload, pod.name, pod.replica, pod.rank, node, _placed(results, self.index), origin=pod.origin)

    def _failed(self, pod: Pod, reason: str, error: bool = False) -> PodOutcome:
        return PodOutcome(pod.workload, pod.name, pod.replica, pod.rank, None, reason=reason, error=error, origin=pod.origin)


_WHO = "\x00workload\x00"


class FreeFrontier:
    """The first node (by position in node order) that can pass `Planner._could_fit` for some claims.

    Per (device class, selectors, count) of an ExactCount option, a position that only moves forward:
    the first node with at least `count` free candidate devices. Allocation only grows, so a node
    passed over never qualifies again. Reads the allocation state and the candidate index, writes neither.
    """

    def __init__(self, nodes: list[str], index: DeviceIndex, state: AllocationState) -> None:
        self.nodes = nodes
        self.index = index
        self.state = state
        self._position = {name: i for i, name in enumerate(nodes)}
        self._eligible: dict[tuple, list[int]] = {}  # (class, selectors) -> positions of nodes with any candidate
        self._next: dict[tuple, int] = {}  # (class, selectors, count) -> index into its eligible positions

    def first_fit(self, claims: list[PodClaim]) -> int:
        """No node before this position passes `_could_fit(claims, node)`; 0 when no bound is known."""
        bound = 0
        try:
            for claim in claims:
                for request in claim.spec.requests:  # type: ignore[union-attr]
                    options = request.options
                    if any(o.mode != EXACT_COUNT or o.admin_access for o in options):
                        continue  # the search judges these
                    bound = max(bound, min(self._first(o) for o in options))
        except ClaimError:
            return 0  # the search reports it when it reaches a node, as it always has
        return bound

    def _first(self, option) -> int:
        key = (option.device_class, option.selectors, option.tolerations)
        eligible = self._eligible.get(key)
        if eligible is None:
            m = self.index.match(option)
            order = range(len(self.nodes)) if m.floating else sorted(self._position[n] for n in m.by_node if n in self._position)
            eligible = self._eligible[key] = list(order)
        counted = key + (option.count,)
        i = self._next.get(counted, 0)
        in_use, nodes = self.state.in_use, self.nodes
        while i < len(eligible) and not _has_free(self.index.candidates(option, nodes[eligible[i]]), in_use, option.count):
            i += 1
        self._next[counted] = i
        return eligible[i] if i < len(eligible) else len(nodes)


def _has_free(candidates: list[int], in_use: bytearray, need: int) -> bool:
    """At least `need` of `candidates` are not in use."""
    free = 0
    for d in candidates:
        if not in_use[d]:
            free += 1
            if free >= need:
                return True
    return free >= need


def _has_alternatives(claims: list[PodClaim]) -> bool:
    return any(len(r.options) > 1 for c in claims for r in c.spec.requests)  # type: ignore[union-attr]


def _alternative_rank(results: list[ClaimResult]) -> int:
    """How far down their firstAvailable lists the claims' requests went (0: every first choice)."""
    rank = 0
    for result in results:
        chosen = {d.request for d in result.devices}
        for request in result.claim.spec.requests:  # type: ignore[union-attr]
            if len(request.options) > 1:
                rank += next((i for i, o in enumerate(request.options) if o.name in chosen), 0)
    return rank


def _free_devices_needed(claims: list[PodClaim]) -> int:
    """A lower bound of the free devices a node needs for `claims` (admin access needs none)."""
    total = 0
    for claim in claims:
        for request in claim.spec.requests:  # type: ignore[union-attr]
            total += min(0 if o.admin_access else (o.count if o.mode == EXACT_COUNT else 1) for o in request.options)
    return total


def _shape(claim: PodClaim) -> object:
    """Pods whose unallocated claims have equal specs behave the same on every node (claims of different
    templates included); a shared claim is its own shape."""
    return ("shared", claim.key) if claim.shared else claim.spec


OTHER_NODES = "(other nodes)"
PCI_DOMAIN, _, PCI_NAME = standard_attribute("pciBusID").rpartition("/")


def _physical_gpu(device, pool: str) -> str | None:
    """The GPU a device lives on: its PCI address where published (a GPU, its MIG devices and its vfio twin
    share it; the vfio device's UUID is not the GPU's), else its own UUID or its MIG parent's; None for
    non-GPU devices."""
    attrs = device.attributes.get(GPU_DRIVER)
    if device.driver != GPU_DRIVER or attrs is None:
        return None
    bus = device.attributes.get(PCI_DOMAIN, {}).get(PCI_NAME)
    if bus is not None:
        return f"{pool}/pci:{bus}"
    uuid = attrs.get("parentUUID") if attrs.get("type") == "mig" else attrs.get("uuid")
    return f"{pool}/{uuid or device.name}"


def _measure(name: str, allocation: str, nodes: int, entries: list[tuple[int, str]], before: bytearray,
             after: bytearray) -> PoolUsage:
    return PoolUsage(name, allocation, nodes, len({g for _, g in entries}), len({g for i, g in entries if before[i]}),
                     len({g for i, g in entries if after[i]}), len(entries), sum(1 for i, _ in entries if after[i]))


def usage(cluster: ResolvedCluster, inventory: Inventory, before: bytearray, after: bytearray) -> tuple[PoolUsage, ...]:
    """Physical GPUs and GPU-driver devices per node pool, in use before and after the plan."""
    pool_of = {n.name: n.pool or OTHER_NODES for n in inventory.nodes}
    nodes = Counter(name for n in inventory.nodes for name in (n.pool or OTHER_NODES, *n.also))
    # a node holding several pools' GPUs (one pool per model): each device goes to the pool of its model
    by_model = {n.name: {p.gpu.product_name: p.name for p in cluster.pools if n.in_pool(p.name)} for n in inventory.nodes if n.also}
    entries: dict[str, list[tuple[int, str]]] = {}
    for device in inventory.devices:
        s = inventory.slices[device.slice_index]
        gpu = _physical_gpu(device, s.pool)
        if gpu is not None:
            node = device.node_name or s.node_name or ""
            owner = (by_model[node].get(str(device.attribute("productName")), pool_of[node]) if node in by_model
                     else pool_of.get(node, OTHER_NODES))
            entries.setdefault(owner, []).append((device.index, gpu))
    out = []
    for pool in cluster.pools:
        if pool.dra:
            out.append(_measure(pool.name, "dra", nodes[pool.name], entries.get(pool.name, []), before, after))
        else:
            gpus = pool.spec.nodes * pool.spec.gpu.count
            out.append(PoolUsage(pool.name, pool.allocation, pool.spec.nodes, gpus, 0, 0, 0, 0))
    if OTHER_NODES in entries or nodes[OTHER_NODES]:
        out.append(_measure(OTHER_NODES, "dra", nodes[OTHER_NODES], entries.get(OTHER_NODES, []), before, after))
    return tuple(out)


def keep_running(planner: Planner, pods: list[Pod], running: tuple[RunningClaim, ...]) -> dict[int, PodOutcome]:
    """gpuc's allocated claims stay on their devices: a shared claim is pinned to its node, and a pod's own claim
    keeps one pod of its workload where it runs (an allocated claim cannot move without a restart). Returns those
    pods' outcomes by index into `pods`; the rest are planned around them."""
    inventory = planner.inventory

    def node_of(devices) -> str:
        device = inventory.devices[devices[0].index]
        return device.node_name or inventory.slices[device.slice_index].node_name or ""

    def results(claim: RunningClaim) -> tuple[DeviceResult, ...]:
        return tuple(DeviceResult(d.request, d.index, d.admin, d.taken) for d in claim.devices)

    shared = {c.key: c for pod in pods for c in pod.claims if c.shared}
    waiting: dict[str, list[RunningClaim]] = {}
    for claim in running:
        if claim.shared and claim.claim in shared:
            planner.state.commit([ClaimResult(shared[claim.claim], node_of(claim.devices), results(claim))])
        elif claim.shared:
            planner.state.hold(claim.claim, ((d.index, d.taken) for d in claim.devices if not d.admin))
        else:
            waiting.setdefault(claim.workload, []).append(claim)
    kept: dict[int, PodOutcome] = {}
    for i, pod in enumerate(pods):
        own = next((c for c in pod.claims if not c.shared and c.label == "gpu"), None)
        queue = waiting.get(pod.workload)
        if own is None or not queue:
            continue
        claim = queue.pop(0)
        planner.state.hold(claim.claim, ((d.index, d.taken) for d in claim.devices if not d.admin))
        node = node_of(claim.devices)
        done = [planner.state.pinned[c.key] for c in pod.claims if c.shared and c.key in planner.state.pinned]
        kept[i] = dataclasses.replace(planner._outcome(pod, node, [*done, ClaimResult(own, node, results(claim))]),
                                      running=claim.claim)
    return kept


def plan_pods(cluster: ResolvedCluster, inventory: Inventory, classes: dict[str, DeviceClass], pods: list[Pod],
              progress: Progress | None = None, detail: bool = True, use: ClusterUse = NO_USE) -> AllocationPlan:
    """Place `pods` on `inventory`, where the claims of `use` already hold their devices; outcomes come back
    in `pods` order. Without `detail` (the render and validate gate, which only reports unplaceable pods)
    placed pods carry no devices and pool usage is left out: a tenth of the planning time at thousands of pods."""
    # the allocator honours what the cluster's Kubernetes minor turns on by default, as its scheduler does
    features = AllocatorFeatures.for_minor(int(cluster.api.kubernetes.split(".")[1]))
    planner = Planner(inventory, classes, record_devices=detail, features=features)
    for claim in use.foreign:
        planner.state.hold(claim.claim, ((d.index, d.taken) for d in claim.devices if not d.admin))
    outcomes: list[PodOutcome | None] = [None] * len(pods)
    for i, outcome in keep_running(planner, pods, use.running).items():
        outcomes[i] = outcome
    before = bytearray(planner.state.held)
    for done, i in enumerate(placement_order(pods)):
        if outcomes[i] is None:
            outcomes[i] = planner.place(pods[i])
        if progress is not None:
            progress(done + 1, len(pods))
    return AllocationPlan(
        cluster=cluster.name, kubernetes=cluster.api.kubernetes, driver=cluster.spec.dra_driver.version,
        inventory=inventory.source, nodes=len(inventory.nodes), devices=len(inventory.devices),
        pods=tuple(o for o in outcomes if o is not None),
        pools=usage(cluster, inventory, before, planner.state.held) if detail else (),
        warnings=inventory.warnings + use.warnings, devices_of=inventory,
        held=tuple((c.claim, len(c.devices)) for c in use.foreign), own_in_use=len(use.own), running=use.live)
