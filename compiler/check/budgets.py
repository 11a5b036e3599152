"""Team budgets against what the cluster's workloads claim, counted as the API server's quota admission counts.

The ResourceQuota gpuc emits for a budget (lower.quotas) makes the API server refuse, at run time, the claim that
takes a namespace over it: the pod that needed it stays Pending with nothing in the pull request to say so. This
check charges every claim the cluster's pods create exactly as the quota evaluator of resource claims does
(facts/data/kubernetes.yaml `deviceQuota`) and refuses the fleet first, naming the workloads and the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..diagnostics import Diagnostic
from ..facts.platform import device_quota
from ..lower.budget_limits import CLAIMS, Limit, cluster_budget_limits
from ..lower.graph import CompiledCluster
from ..place.allocator import ClaimSpec, Pod, cluster_pods
from ..place.allocator.requests import EXACT_COUNT
from .model import ClusterContext


def claim_charge(spec: ClaimSpec) -> dict[str, int]:
    """Devices per DeviceClass that quota charges one claim: a request's count, allocationMode All at the worst case,
    and a firstAvailable request at the largest count among its subrequests, per class they name."""
    all_mode = device_quota().all_mode_devices
    out: dict[str, int] = {}
    for request in spec.requests:
        largest: dict[str, int] = {}
        for option in request.options:
            n = option.count if option.mode == EXACT_COUNT else all_mode
            largest[option.device_class] = max(largest.get(option.device_class, 0), n)
        for cls, n in largest.items():
            out[cls] = out.get(cls, 0) + n
    return out


@dataclass
class NamespaceCharge:
    """What a namespace's claims are charged, in total and per workload (a shared claim is charged to the first
    workload of its share group that references it, once)."""

    total: dict[str, int] = field(default_factory=dict)
    by_workload: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, workload: str, charge: dict[str, int]) -> None:
        mine = self.by_workload.setdefault(workload, {})
        for key, n in charge.items():
            self.total[key] = self.total.get(key, 0) + n
            mine[key] = mine.get(key, 0) + n


def namespace_charges(pods: Iterable[Pod]) -> dict[str, NamespaceCharge]:
    """Per namespace, what quota admission charges the claims `pods` create: one claim per pod for a template, one per
    shared claim however many pods reference it."""
    seen: set[str] = set()
    out: dict[str, NamespaceCharge] = {}
    for pod in pods:
        namespace = pod.workload.split("/", 1)[0]
        for claim in pod.claims:
            if claim.key in seen or claim.spec is None:
                continue
            seen.add(claim.key)
            out.setdefault(namespace, NamespaceCharge()).add(pod.workload, {CLAIMS: 1, **claim_charge(claim.spec)})
    return out


def _named(key: str, charge: NamespaceCharge) -> str:
    """The workloads charged for `key`, largest first: `research/trainer 16, research/notebooks 2`."""
    parts = sorted(((w, c.get(key, 0)) for w, c in charge.by_workload.items() if c.get(key, 0)), key=lambda x: (-x[1], x[0]))
    return ", ".join(f"{w} {n}" for w, n in parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")


def _over(limit: int, key: str, charge: NamespaceCharge) -> str:
    what = "ResourceClaims" if key == CLAIMS else f"devices of DeviceClass {key}"
    return f"{charge.total.get(key, 0)} {what} against a budget of {limit} ({_named(key, charge)})"


@dataclass(frozen=True)
class BudgetUse:
    """One limit of a team budget against what the cluster's claims use of it (`gpuc plan`, `gpuc diff`)."""

    namespace: str
    limit: Limit
    used: int

    @property
    def left(self) -> int:
        return self.limit.limit - self.used

    @property
    def over(self) -> bool:
        return self.used > self.limit.limit

    def as_dict(self) -> dict:
        key = {"counts": "claims"} if self.limit.key == CLAIMS else {"counts": "devices", "deviceClass": self.limit.key}
        return {"namespace": self.namespace, **key, "used": self.used, "limit": self.limit.limit, "left": self.left,
                "over": self.over, **({"notListed": {"sameDevicesAs": self.limit.covers}} if self.limit.covers else {})}


def budget_use(compiled: CompiledCluster, charges: dict[str, NamespaceCharge] | None = None) -> list[BudgetUse]:
    """Every limit of every budget of the cluster with what its claims use of it, in budget order."""
    if not compiled.cluster.spec.budgets:
        return []
    charges = namespace_charges(cluster_pods(compiled)) if charges is None else charges
    return [BudgetUse(budget.namespace, limit, charges.get(budget.namespace, NamespaceCharge()).total.get(limit.key, 0))
            for budget, limits in cluster_budget_limits(compiled.cluster, compiled.objects) for limit in limits]


def budget_findings(compiled: CompiledCluster) -> list[Diagnostic]:
    if not compiled.cluster.spec.budgets:
        return []
    charges = namespace_charges(cluster_pods(compiled))
    uses = budget_use(compiled, charges)
    intent = compiled.cluster.intent
    out = []
    for use in uses:
        if not use.over:
            continue
        limit, charge = use.limit, charges[use.namespace]
        where = f"namespace '{use.namespace}' on cluster '{compiled.name}'"
        if limit.covers:
            out.append(intent.error(
                limit.where, f"{where} would claim {use.used} devices of DeviceClass {limit.key} ({_named(limit.key, charge)}), "
                             f"which the budget does not list and which selects devices of the type it caps through "
                             f"{limit.covers} ({limit.device_type}): its ResourceQuota holds every such class at 0, so that no "
                             "class name escapes the budget, and the API server's quota admission refuses those claims",
                f"add `{limit.key}: {use.used}` to spec.budgets[{limit.where[2]}].devices (the namespace may then hold that many "
                f"devices through it beside those of {limit.covers}), or have those workloads claim through {limit.covers}"))
            continue
        out.append(intent.error(
            limit.where, f"{where} would claim {_over(limit.limit, limit.key, charge)}: "
                         "the API server's quota admission refuses the claims over it and their pods stay Pending",
            f"raise this budget by {use.used - limit.limit}, or lower the replicas or GPU counts of those workloads"))
    return out


def check_budgets(ctx: ClusterContext) -> list[Diagnostic]:
    return budget_findings(ctx.compiled)
