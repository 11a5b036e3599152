"""What to add when pods cannot be placed: per node pool, the fewest nodes of its shape that place them all, found
by the allocator itself (so the answer is a placement, not an estimate), and what each pool has left after the plan.

The search (`smallest`) doubles the added nodes until the pending pods fit, then bisects. Each step is a real
allocator run of the pending pods on that many synthesized nodes of the pool, appended after every node of the
cluster: the pods the plan placed take the nodes they took (the allocator tries nodes in order and the existing
nodes come first), so the added nodes must hold exactly the pods that did not fit. The answer recommended is then
planned once more from scratch with the pool grown in place (`gpuc plan` after the change), and raised until
that plan fits too, should the greedy order place pods differently there; a raise can cost more than an
alternative's answer, which is then checked the same way and recommended if it costs less.

A pod no addition helps is named with the reason: the scheduler reported an error, or its shared claim is already
allocated on a node that is full. When no one pool places every pending pod (some only fit another pool's GPUs),
pools are combined: the pool that places the most first, each with its smallest addition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cel import parse_quantity
from ..validate.resolved import ResolvedCluster, ResolvedPool
from .allocator import AllocationPlan, DeviceClass, Pod, placement_order, plan_pods
from .inventory import synthesize

ADDED = "added"  # synthesized node names: <pool>-added-<i>


@dataclass(frozen=True)
class Addition:
    pool: str
    nodes: int
    gpus: int  # physical GPUs those nodes hold

    def as_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "nodes": self.nodes, "gpus": self.gpus}


@dataclass(frozen=True)
class PoolFree:
    pool: str
    gpus: int  # physical GPUs with nothing allocated
    devices: int  # devices (full GPUs or MIG slices) nothing allocated
    mig: bool  # the devices are MIG slices
    shareable: str = ""  # consumable GPU memory left on devices claims share ("" when the pool has none)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pool": self.pool, "freeGpus": self.gpus,
                               ("freeMigSlices" if self.mig else "freeDevices"): self.devices}
        if self.shareable:
            out["shareableMemoryLeft"] = self.shareable
        return out


@dataclass(frozen=True)
class Headroom:
    pending: int  # unplaced pods an addition could place
    options: tuple[Addition, ...]  # one pool each, every one placing all pending pods; fewest GPUs first
    combined: tuple[Addition, ...]  # when no one pool does: additions over several pools that together do
    stuck: tuple[tuple[str, str], ...]  # (pod, why) no addition places
    free: tuple[PoolFree, ...]
    verified: bool = True  # the recommendation was planned from scratch with the pools grown in place, and fits

    @property
    def recommended(self) -> tuple[Addition, ...]:
        return self.options[:1] or self.combined

    def as_dict(self) -> dict[str, Any]:
        return {"pendingPods": self.pending, "recommended": [a.as_dict() for a in self.recommended],
                "alternatives": [a.as_dict() for a in self.options[1:]], "combined": [a.as_dict() for a in self.combined],
                "stuck": [{"pod": p, "reason": r} for p, r in self.stuck], "free": [f.as_dict() for f in self.free]}


def smallest(placed: Callable[[int], int], want: int, upper: int) -> int | None:
    """The smallest n in 1..upper with placed(n) >= want (placed grows with n), by doubling then bisection; None
    when even `upper` falls short. Calls placed O(log upper) times."""
    if want <= 0:
        return 0
    low, n = 0, 1  # placed(low) < want is known
    while True:
        n = min(n, upper)
        if placed(n) >= want:
            break
        if n == upper:
            return None
        low, n = n, n * 2
    high = n
    while high - low > 1:
        mid = (low + high) // 2
        if placed(mid) >= want:
            high = mid
        else:
            low = mid
    return high


def grown(cluster: ResolvedCluster, added: dict[str, int], in_place: bool) -> ResolvedCluster:
    """`cluster` with nodes added to pools (a pool's node mates, the pools of the same multi-GPU-model nodes, grow
    with it). in_place: every pool, the grown ones longer; else only the added nodes, named <pool>-added-<i>."""
    grow: dict[str, tuple[int, str]] = {}
    for name, n in added.items():
        pool = next(p for p in cluster.pools if p.name == name)
        for mate in cluster.node_mates(pool):
            grow[mate.name] = (n, name)
    pools = []
    for pool in cluster.pools:
        if pool.name not in grow:
            if in_place:
                pools.append(pool)
            continue
        n, owner = grow[pool.name]
        new = [f"{owner}-{ADDED}-{i}" for i in range(n)]
        if in_place:
            names = list(pool.spec.node_names) + new if pool.spec.node_names else None
            spec = pool.spec.model_copy(update={"nodes": pool.spec.nodes + n, "node_names": names})
        else:
            spec = pool.spec.model_copy(update={"nodes": n, "node_names": new})
        pools.append(dataclasses.replace(pool, spec=spec))
    return dataclasses.replace(cluster, pools=tuple(pools))


def _gpus_per_node(cluster: ResolvedCluster, pool: ResolvedPool) -> int:
    return sum(p.spec.gpu.count for p in cluster.node_mates(pool))


@dataclass
class Search:
    """The pending pods and what placing them on added nodes needs."""

    cluster: ResolvedCluster
    chart_values: dict[str, Any]
    node_labels: dict[str, dict[str, str]]
    classes: dict[str, DeviceClass]
    runs: int = 0

    def placed_on(self, pool: str, n: int, pods: list[Pod]) -> set[int]:
        """Indices of `pods` the allocator places on n added nodes of `pool` (nothing else on them)."""
        self.runs += 1
        cluster = grown(self.cluster, {pool: n}, in_place=False)
        inventory = synthesize(cluster, self.chart_values, self.node_labels)
        plan = plan_pods(cluster, inventory, self.classes, pods, detail=False)
        return {i for i, o in enumerate(plan.pods) if o.placed}

    def counter(self, pool: str, pods: list[Pod]) -> Callable[[int], int]:
        """n -> how many of `pods` n added nodes of `pool` place: what `smallest` searches."""
        return lambda n: len(self.placed_on(pool, n, pods))

    def fits(self, added: dict[str, int], pods: list[Pod]) -> bool:
        """Every pod placed on the cluster with `added` nodes in place: the plan `gpuc plan` makes after the change."""
        self.runs += 1
        cluster = grown(self.cluster, added, in_place=True)
        inventory = synthesize(cluster, self.chart_values, self.node_labels)
        return plan_pods(cluster, inventory, self.classes, pods, detail=False).feasible


def _pending(pods: list[Pod], plan: AllocationPlan) -> tuple[list[Pod], list[tuple[str, str]]]:
    """Unplaced pods an added node could hold, in placement order, and those it could not, with why."""
    outcome = {(o.workload, o.pod): o for o in plan.pods}
    placed_shared = {c.key for p in pods if outcome[(p.workload, p.name)].placed for c in p.claims if c.shared}
    pending, stuck = [], []
    for i in placement_order(pods):
        pod = pods[i]
        o = outcome[(pod.workload, pod.name)]
        if o.placed:
            continue
        pinned = [c.key for c in pod.claims if c.shared and c.key in placed_shared]
        if o.error:
            stuck.append((pod.name, "the scheduler would report an error: " + o.reason))
        elif pinned:
            stuck.append((pod.name, f"its shared claim {pinned[0]} is allocated on a node that has no room left for it; "
                                    "added nodes cannot hold it"))
        else:
            pending.append(pod)
    return pending, stuck


def free_capacity(cluster: ResolvedCluster, plan: AllocationPlan) -> tuple[PoolFree, ...]:
    """Per DRA pool, what the plan leaves: GPUs with nothing allocated, free devices (MIG slices on static MIG
    pools), and consumable GPU memory left on shared devices (needs a detailed plan)."""
    taken: dict[int, int] = {}
    inventory = plan.devices_of
    by_name = {(inventory.slices[d.slice_index].pool, d.name): d for d in inventory.devices} if inventory is not None else {}
    for o in plan.pods:
        for c in o.claims:
            for d in c.devices:
                device = by_name.get((d.pool, d.device))
                for name, amount in d.consumed:
                    if device is not None and name == "memory":
                        taken[device.index] = taken.get(device.index, 0) + int(parse_quantity(amount).value)
    pool_of = {n.name: n.pool for n in inventory.nodes} if inventory is not None else {}
    left: dict[str, int] = {}
    for d in inventory.devices if inventory is not None else []:
        if d.multi:
            memory = next((caps["memory"] for caps in d.capacity.values() if "memory" in caps), None)
            node = d.node_name or inventory.slices[d.slice_index].node_name or ""
            if memory is not None and node in pool_of:
                left[pool_of[node] or ""] = left.get(pool_of[node] or "", 0) + int(memory.value) - taken.get(d.index, 0)
    static_mig = {p.name for p in cluster.pools if p.mig_layout is not None}
    out = []
    for usage in plan.pools:
        if usage.allocation != "dra":
            continue
        shareable = f"{left[usage.pool] // 2**30}Gi" if usage.pool in left else ""
        out.append(PoolFree(usage.pool, usage.gpus - usage.gpus_used, usage.devices - usage.devices_used,
                            usage.pool in static_mig, shareable))
    return tuple(out)


def _cost(additions: list[Addition]) -> tuple[int, int]:
    return sum(a.gpus for a in additions), sum(a.nodes for a in additions)


def _raised(search: Search, additions: list[Addition], pods: list[Pod]) -> tuple[list[Addition], bool]:
    """`additions` planned from scratch with every pod and the nodes in place, grown a node a pool at a time (at most 8)
    until that plan fits, should the greedy order pack differently there: (what to add, whether it fit)."""
    added, fit = {a.pool: a.nodes for a in additions}, False
    for _ in range(8):
        if fit := search.fits(added, pods):
            break
        added = {k: v + 1 for k, v in added.items()}
    return [dataclasses.replace(a, nodes=added[a.pool], gpus=added[a.pool] * a.gpus // a.nodes) for a in additions], fit


def _checked(search: Search, candidates: list[list[Addition]], pods: list[Pod]) -> list[tuple[list[Addition], bool]]:
    """`candidates` (fewest GPUs, then nodes, first) ranked again once planned from scratch: raising only adds nodes, so
    candidates are raised in order until the best that fits costs no more than the next one's search answer (a raise
    can put the first behind an alternative); those that never fit go last."""
    done: list[tuple[list[Addition], bool]] = []
    rest = list(candidates)
    while rest and not any(ok and _cost(c) <= _cost(rest[0]) for c, ok in done):
        done.append(_raised(search, rest.pop(0), pods))
    return sorted(done + [(c, True) for c in rest], key=lambda d: (not d[1], _cost(d[0])))


def headroom(cluster: ResolvedCluster, chart_values: dict[str, Any], node_labels: dict[str, dict[str, str]],
             classes: dict[str, DeviceClass], pods: list[Pod], plan: AllocationPlan, verify: bool = True) -> Headroom:
    """verify: plan the recommendation from scratch with the pools grown in place (not against a running cluster's
    state, whose devices gpuc cannot grow)."""
    free = free_capacity(cluster, plan) if plan.pools else ()
    if plan.feasible:
        return Headroom(0, (), (), (), free)
    pending, stuck = _pending(pods, plan)
    search = Search(cluster, chart_values, node_labels, classes)
    pools = [p for p in cluster.dra_pools if p.spec.nodes and cluster.node_mates(p)[0] is p]  # one entry per node shape
    options = []
    best: list[tuple[int, ResolvedPool, set[int]]] = []  # per pool: what its largest addition places
    for pool in pools if pending else []:
        most = search.placed_on(pool.name, len(pending), pending)
        best.append((len(most), pool, most))
        if len(most) == len(pending):
            n = smallest(search.counter(pool.name, pending), len(pending), len(pending))
            assert n is not None
            options.append(Addition(pool.name, n, n * _gpus_per_node(cluster, pool)))
    options.sort(key=lambda a: (a.gpus, a.nodes))  # ties keep the pools' order (sort is stable)
    combined: list[Addition] = []
    left: list[Pod] = []
    if not options and pending:
        left = pending
        while left:
            scored = [(len(search.placed_on(p.name, len(left), left)), -i, p) for i, p in enumerate(pools)]
            count, _, pool = max(scored, key=lambda s: (s[0], s[1]))
            if count == 0:
                break
            n = smallest(search.counter(pool.name, left), count, len(left))
            assert n is not None
            done = search.placed_on(pool.name, n, left)
            combined.append(Addition(pool.name, n, n * _gpus_per_node(cluster, pool)))
            left = [p for i, p in enumerate(left) if i not in done]
            pools = [p for p in pools if p is not pool]
        stuck += [(p.name, "no pool's nodes can hold it, however many are added") for p in left]
    verified = verify
    if (options or combined) and not left and verify:
        checked = _checked(search, [[a] for a in options] or [combined], pods)
        verified = checked[0][1]
        if options:
            options = [a for (a,), _ in checked]
        else:
            combined = checked[0][0]
    return Headroom(len(pending), tuple(options), tuple(combined), tuple(stuck), free, verified)
