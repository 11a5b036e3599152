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
from ..lower.graph import CompiledCluster
from ..place.allocator import ClaimSpec, Pod, cluster_pods
from ..place.allocator.requests import EXACT_COUNT
from .model import ClusterContext

CLAIMS = "claims"  # the charge key of a claim itself, beside DeviceClass names


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


def _over(limit: int, key: str, charge: NamespaceCharge) -> str:
    used = charge.total.get(key, 0)
    what = "ResourceClaims" if key == CLAIMS else f"devices of DeviceClass {key}"
    parts = sorted(((w, c.get(key, 0)) for w, c in charge.by_workload.items() if c.get(key, 0)), key=lambda x: (-x[1], x[0]))
    named = ", ".join(f"{w} {n}" for w, n in parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")
    return f"{used} {what} against a budget of {limit} ({named})"


def budget_findings(compiled: CompiledCluster) -> list[Diagnostic]:
    budgets = compiled.cluster.spec.budgets
    if not budgets:
        return []
    charges = namespace_charges(cluster_pods(compiled))
    intent = compiled.cluster.intent
    out = []
    for i, budget in enumerate(budgets):
        charge = charges.get(budget.namespace, NamespaceCharge())
        limits: list[tuple[str, int, tuple[str | int, ...]]] = []
        if budget.claims is not None:
            limits.append((CLAIMS, budget.claims, ("spec", "budgets", i, "claims")))
        limits += [(cls, n, ("spec", "budgets", i, "devices", cls)) for cls, n in sorted(budget.devices.items())]
        for key, limit, where in limits:
            if charge.total.get(key, 0) <= limit:
                continue
            extra = charge.total[key] - limit
            out.append(intent.error(
                where, f"namespace '{budget.namespace}' on cluster '{compiled.name}' would claim {_over(limit, key, charge)}: "
                       "the API server's quota admission refuses the claims over it and their pods stay Pending",
                f"raise this budget by {extra}, or lower the replicas or GPU counts of those workloads"))
    return out


def check_budgets(ctx: ClusterContext) -> list[Diagnostic]:
    return budget_findings(ctx.compiled)
