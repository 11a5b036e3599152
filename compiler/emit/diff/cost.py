"""What a change costs, per cluster and node pool: the GPUs (MIG slices) the head's pods take against the base's,
whether the head still fits, what is left, the team budgets it moves, and the nodes to add when it no longer fits.
Read from the two sides' placements and headroom (place.headroom) and the budgets' charges (check.budgets): the
same numbers `gpuc plan` prints, side by side, for a reviewer who has ten seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...check.budgets import CLAIMS, budget_use, namespace_charges
from ...lower.graph import CompiledCluster
from ...place.allocator import AllocationPlan, cluster_pods
from ...place.headroom import Addition

Pair = tuple[int | None, int | None]


@dataclass(frozen=True)
class PoolCost:
    pool: str
    gpus: Pair  # physical GPUs the placed pods hold, before and after
    devices: Pair  # devices they hold (MIG slices on a static MIG pool)
    mig: bool
    free: int | None  # GPUs nothing holds after the change

    @property
    def changed(self) -> bool:
        return self.gpus[0] != self.gpus[1] or self.devices[0] != self.devices[1]

    def as_dict(self) -> dict[str, Any]:
        unit = "migSlices" if self.mig else "devices"
        return {"pool": self.pool, "gpus": {"before": self.gpus[0], "after": self.gpus[1]},
                unit: {"before": self.devices[0], "after": self.devices[1]}, "freeGpusAfter": self.free}


@dataclass(frozen=True)
class BudgetTouch:
    namespace: str
    key: str  # a DeviceClass, or "claims"
    before: int | None
    after: int
    limit: int
    covers: str = ""  # a class the budget does not list, held at 0 beside this listed one (lower.budget_limits)

    @property
    def over(self) -> bool:
        return self.after > self.limit

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "limit": ("claims" if self.key == CLAIMS else self.key),
                "before": self.before, "after": self.after, "budget": self.limit, "over": self.over,
                **({"notListed": {"sameDevicesAs": self.covers}} if self.covers else {})}


@dataclass
class ClusterCost:
    fits: bool | None  # the head places every pod (None: the head has no plan)
    pools: list[PoolCost] = field(default_factory=list)
    budgets: list[BudgetTouch] = field(default_factory=list)
    add: tuple[Addition, ...] = ()  # the smallest addition that places the head's pods, when they do not fit
    stuck: int = 0  # head pods no addition places

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.pools) or any(b.before != b.after for b in self.budgets)

    def as_dict(self) -> dict[str, Any]:
        return {"fits": self.fits, "pools": [p.as_dict() for p in self.pools], "budgets": [b.as_dict() for b in self.budgets],
                "add": [a.as_dict() for a in self.add], "podsNoAdditionPlaces": self.stuck}


def _by_pool(plan: AllocationPlan | None) -> dict[str, Any]:
    return {u.pool: u for u in plan.pools if u.allocation == "dra"} if plan is not None else {}


def _budgets(old: CompiledCluster | None, new: CompiledCluster | None) -> list[BudgetTouch]:
    """The head's budget limits (check.budgets.budget_use) that the change moves or that the head goes over."""
    if new is None or not new.cluster.spec.budgets:
        return []
    before = namespace_charges(cluster_pods(old)) if old is not None else {}
    out = []
    for use in budget_use(new):
        charge = before.get(use.namespace)
        was = (charge.total.get(use.limit.key, 0) if charge is not None else 0) if old is not None else None
        if was != use.used or use.over:
            out.append(BudgetTouch(use.namespace, use.limit.key, was, use.used, use.limit.limit, use.limit.covers))
    return out


def cluster_cost(plans: tuple[AllocationPlan | None, AllocationPlan | None], old: CompiledCluster | None,
                 new: CompiledCluster | None) -> ClusterCost:
    base, head = plans
    olds, news = _by_pool(base), _by_pool(head)
    room = head.headroom if head is not None else None
    free = {f.pool: f.gpus for f in room.free} if room is not None else {}
    static_mig = {p.name for p in new.cluster.pools if p.mig_layout is not None} if new is not None else set()
    pools = []
    for name in list(news) + [n for n in olds if n not in news]:
        a, b = olds.get(name), news.get(name)
        pools.append(PoolCost(name, (a.gpus_used if a else (0 if base is not None else None), b.gpus_used if b else 0),
                              (a.devices_used if a else (0 if base is not None else None), b.devices_used if b else 0),
                              name in static_mig, free.get(name)))
    add = room.recommended if room is not None and head is not None and not head.feasible else ()
    return ClusterCost(head.feasible if head is not None else None, pools, _budgets(old, new), tuple(add),
                       len(room.stuck) if room is not None else 0)
