"""The outcome of planning a cluster: where every pod went (or why it could not go) and how full each
node pool is. Plain data, so `gpuc plan`, the render gate, and later reports and diffs share it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...diagnostics import Diagnostic
from ...load.yaml_source import SourceDoc


class PlacedDevice(NamedTuple):  # built per placed device: a NamedTuple costs a fifth of a frozen dataclass
    request: str
    driver: str
    pool: str
    device: str
    admin: bool = False
    consumed: tuple[tuple[str, str], ...] = ()  # (capacity name, amount) it takes of a device others share

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}
        if self.admin:
            out["adminAccess"] = True
        if self.consumed:
            out["consumedCapacity"] = dict(self.consumed)
        return out


class PlacedClaim(NamedTuple):
    claim: str  # ns/name of the claim object (template instances are named after the pod)
    label: str  # gpu | channel
    source: str  # the object the claim comes from
    shared: bool
    devices: tuple[PlacedDevice, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "name": self.label, "source": self.source, "shared": self.shared,
                "devices": [d.as_dict() for d in self.devices]}


@dataclass(frozen=True)
class PodOutcome:
    workload: str  # ns/name
    pod: str
    replica: int
    rank: int
    node: str | None
    claims: tuple[PlacedClaim, ...] = ()
    reason: str = ""  # why the pod cannot be placed
    error: bool = False  # the scheduler would report an error (bad CEL, missing class), not a Pending pod
    origin: SourceDoc | None = field(default=None, compare=False, repr=False)
    running: str = ""  # the allocated claim (ns/name) a running pod holds: it stays on that node

    @property
    def placed(self) -> bool:
        return self.node is not None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload": self.workload, "pod": self.pod, "replica": self.replica}
        if self.rank:
            out["rank"] = self.rank
        out["node"] = self.node
        if self.running:
            out["running"] = self.running
        if self.placed:
            out["claims"] = [c.as_dict() for c in self.claims]
        else:
            out["reason"] = self.reason
            out["error"] = self.error
        return out

    def diagnostic(self, cluster: str) -> Diagnostic:
        origin = self.origin
        kind = "cannot be allocated (the scheduler reports an error)" if self.error else "cannot be placed"
        message = f"pod {self.pod} of {self.workload} {kind} on cluster '{cluster}': {self.reason}"
        hint = ("fix the selector or class the message names" if self.error else
                "add nodes or GPUs to a matching pool, relax gpu.require, or lower replicas / count")
        if origin is None:
            return Diagnostic(self.workload, 0, "spec.gpu", message, hint)
        path = ("spec", "gpu")
        return Diagnostic(origin.file, origin.line_of(path), "spec.gpu", message, hint)


@dataclass(frozen=True)
class PoolUsage:
    pool: str
    allocation: str  # dra | devicePlugin | unknown (nodes of loaded slices no pool names)
    nodes: int
    gpus: int  # physical GPUs published (full GPUs and MIG parents)
    gpus_used_before: int
    gpus_used: int
    devices: int  # GPU-driver devices published (full GPUs, MIG devices or placements)
    devices_used: int

    def as_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "allocation": self.allocation, "nodes": self.nodes, "gpus": self.gpus,
                "before": {"gpusUsed": self.gpus_used_before}, "after": {"gpusUsed": self.gpus_used},
                "devices": self.devices, "devicesUsed": self.devices_used}


# What a plan promises, said in every report (issue 4: "the real scheduler may pick a different but
# equivalent device: say so in the report"). The order is planner.placement_order.
POD_ORDER = "largest-and-most-constrained-first"
PLACEMENT_NOTES = (
    "gpuc places pods largest and most constrained first (most devices, then matchAttribute constraints), "
    "so \"fits\" holds for that order; pods arriving in another order can fragment nodes differently",
    "devices and nodes are taken in a fixed documented order; the real scheduler may pick a different but "
    "equivalent device or node",
    "gpuc allocates with the DRA feature gates the cluster's Kubernetes minor turns on by default; alpha gates a "
    "cluster turns on itself (list-typed and derived attributes, compatibility groups, optional node operations) "
    "change the scheduler's answers (docs/explanation/allocator-vs-scheduler.md)",
)


@dataclass(frozen=True)
class AllocationPlan:
    cluster: str
    kubernetes: str
    driver: str
    inventory: str  # "synthesized" or the --slices file
    nodes: int
    devices: int
    pods: tuple[PodOutcome, ...]
    pools: tuple[PoolUsage, ...]
    warnings: tuple[Diagnostic, ...] = ()
    devices_of: Any = field(default=None, compare=False, repr=False)  # the Inventory planned on (reports draw it)
    held: tuple[tuple[str, int], ...] = ()  # claims already in the cluster that are not gpuc's: (ns/name, devices)
    own_in_use: int = 0  # gpuc's own claims found allocated in the cluster (running pods stay on them)
    running: bool = False  # planned against the running cluster's state (--state, --kubeconfig)
    headroom: Any = field(default=None, compare=False)  # place.headroom.Headroom of a detailed plan: what is left, what to add
    budgets: tuple[Any, ...] = field(default=(), compare=False)  # check.budgets.BudgetUse of a detailed plan: per team limit

    @property
    def feasible(self) -> bool:
        return all(p.placed for p in self.pods)

    @property
    def unplaced(self) -> list[PodOutcome]:
        return [p for p in self.pods if not p.placed]

    def diagnostics(self) -> list[Diagnostic]:
        """One finding per workload and reason: replicas of one workload fail alike, and forty lines saying so
        hide the one number to change (replicas, at its line)."""
        groups: dict[tuple[str, str, bool], list[PodOutcome]] = {}
        for p in self.unplaced:
            groups.setdefault((p.workload, p.reason, p.error), []).append(p)
        pods: dict[str, int] = {}
        for p in self.pods:
            pods[p.workload] = pods.get(p.workload, 0) + 1
        return [group[0].diagnostic(self.cluster) if len(group) == 1 else self._folded(group, pods[group[0].workload])
                for group in groups.values()]

    def _folded(self, group: list[PodOutcome], total: int) -> Diagnostic:
        first = group[0]  # the same words with or without detail: the render gate and `gpuc plan` agree
        message = (f"{len(group)} of {total} pods of {first.workload} cannot be placed on cluster '{self.cluster}' "
                   f"({', '.join(p.pod for p in group[:3])}{', ...' if len(group) > 3 else ''}): {first.reason}")
        hint = ("fix the selector or class the message names" if first.error else
                f"lower replicas to {total - len(group)} or fewer, add nodes or GPUs to a matching pool, or relax gpu.require / count")
        origin = first.origin
        if origin is None:
            return Diagnostic(first.workload, 0, "spec.replicas", message, hint)
        spec = origin.value.get("spec") if isinstance(origin.value, dict) else None
        path = ("spec", "replicas") if isinstance(spec, dict) and "replicas" in spec and not first.error else ("spec", "gpu")
        return Diagnostic(origin.file, origin.line_of(path), ".".join(path), message, hint)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster, "kubernetes": self.kubernetes, "draDriver": self.driver, "feasible": self.feasible,
            "inventory": {"source": self.inventory, "nodes": self.nodes, "devices": self.devices},
            **({"inUseBefore": {"claims": [{"claim": c, "devices": n} for c, n in self.held], "gpucClaims": self.own_in_use}}
               if self.running else {}),
            "pods": [p.as_dict() for p in self.pods],
            "pools": [p.as_dict() for p in self.pools],
            "placement": {"podOrder": POD_ORDER, "notes": list(PLACEMENT_NOTES)},
            **({"headroom": self.headroom.as_dict()} if self.headroom is not None else {}),
            "budgets": [b.as_dict() for b in self.budgets],
            "warnings": [w.as_dict() for w in self.warnings],
        }
