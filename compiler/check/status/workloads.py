"""Are the workloads running? Their claims, NIM services and caches, ComputeDomains, and whether the fleet
still fits the devices the running cluster has free."""

from __future__ import annotations

from typing import Any

from ...facts.driver import parse_driver_version
from ...load.state import StateObject
from ...place.allocator import AllocationPlan
from ...place.held import Ownership
from .context import RESOURCE, StatusContext, names

NIM = "apps.nvidia.com"


def claim_state(claim: StateObject) -> str:
    """kubectl's STATE column: pending, or allocated and/or reserved, and deleted."""
    parts = []
    if claim.metadata.get("deletionTimestamp"):
        parts.append("deleted")
    if claim.status.get("allocation"):
        parts.append("allocated")
    if claim.status.get("reservedFor"):
        parts.append("reserved")
    return ",".join(parts) or "pending"


def claims(ctx: StatusContext) -> None:
    if not ctx.compiled.plan.workloads:
        return
    if not ctx.state.has(RESOURCE, "ResourceClaim"):
        ctx.skip("claims", "ResourceClaims")
        return
    ownership = Ownership(ctx.compiled)
    states = {c: claim_state(c) for c in ctx.state.of(RESOURCE, "ResourceClaim") if ownership.owns(c)}
    ours = list(states)
    pending = [c for c, s in states.items() if s == "pending"]
    deleted = [c for c, s in states.items() if "deleted" in s]
    if pending:
        ctx.add("claims", "fail", f"{len(pending)} of gpuc's {len(ours)} claim(s) are pending (no device allocated): "
                f"{names([f'{c.namespace}/{c.name}' for c in pending])}",
                f"`kubectl describe pod` of the pod using it shows the scheduler's reason; `gpuc plan FLEET --cluster "
                f"{ctx.compiled.name} --state FILE` shows which devices it could get", pending[0])
    if deleted:
        ctx.add("claims", "warn", f"{len(deleted)} claim(s) are being deleted but not finalized: {names([f'{c.namespace}/{c.name}' for c in deleted])}",
                "the DRA kubelet plugin unprepares a claim before it goes: check it runs on the claim's node", deleted[0])
    working = sum(1 for s in states.values() if s == "allocated,reserved")
    if ours and not pending and not deleted:
        ctx.add("claims", "ok", f"{working} of gpuc's {len(ours)} claim(s) are allocated,reserved"
                + ("" if working == len(ours) else "; the others are allocated and wait for a pod"))
    elif not ours:
        ctx.add("claims", "ok", "no claim of gpuc's workloads exists yet (no pod created one)")


def _rendered(ctx: StatusContext, kind: str) -> list[StateObject]:
    found = []
    for obj in ctx.compiled.objects:
        if obj.kind == kind:
            live = ctx.state.get(obj.api_version.rpartition("/")[0], kind, obj.namespace, obj.name)
            if live is not None:
                found.append(live)
    return found


def nim(ctx: StatusContext) -> None:
    for kind in ("NIMCache", "NIMService"):
        if not any(o.kind == kind for o in ctx.compiled.objects):
            continue
        if not ctx.state.has(NIM, kind):
            ctx.skip("nim", kind + "s")
            continue
        for live in _rendered(ctx, kind):
            _nim_object(ctx, live)


def _nim_object(ctx: StatusContext, live: StateObject) -> None:
    state = str(live.status.get("state") or "")
    label = live.label
    if not state:
        ctx.add("nim", "warn", f"{label} has no status: the NIM Operator has not reconciled it",
                "is the NIM Operator running? `kubectl get pods -A -l app.kubernetes.io/name=k8s-nim-operator`", live)
        return
    bad = []
    for entry in live.status.get("draResourceStatuses") or []:
        statuses = [entry.get("resourceClaimStatus")] if entry.get("resourceClaimStatus") else \
            (entry.get("resourceClaimTemplateStatus") or {}).get("resourceClaimStatuses") or []
        bad += [f"{s.get('name')} {s.get('state')}" for s in statuses
                if isinstance(s, dict) and ("pending" in str(s.get("state")) or "deleted" in str(s.get("state")))]
    why = _trouble(live.status.get("conditions"))
    if state == "Failed":
        ctx.add("nim", "fail", f"{label} is Failed{why}", f"`kubectl describe {live.kind.lower()} -n {live.namespace} {live.name}`",
                live, ("status", "state"))
    elif bad:
        ctx.add("nim", "fail", f"{label} is {state}: its claims are {names(bad)}",
                "a pending claim found no device: `gpuc plan FLEET --cluster C --state FILE` shows why", live, ("status", "draResourceStatuses"))
    elif state != "Ready":
        ctx.add("nim", "warn", f"{label} is {state}{why}", "a model download or a first start takes minutes; check again, then "
                f"`kubectl describe {live.kind.lower()} -n {live.namespace} {live.name}`", live, ("status", "state"))
    else:
        ctx.add("nim", "ok", f"{label} is Ready")


def _trouble(conditions: Any) -> str:
    """" (ReconcileFailed: ... 401 Unauthorized; JobFailed: ...)": what the operator says went wrong. It reports a
    failure as a condition that is True (NIM_CACHE_RECONCILE_FAILED, with the error's text: k8s-nim-operator
    v3.1.2 internal/controller/nimcache_controller.go) and an unmet step as one that is False (JobFailed)."""
    failing = [c for c in conditions or [] if isinstance(c, dict) and (
        c.get("status") == "False" or (c.get("status") == "True" and "fail" in str(c.get("type", "")).lower()))]
    failing.sort(key=lambda c: c.get("status") != "True")  # the error itself first
    said = list(dict.fromkeys(f"{c.get('reason') or c.get('type')}: {c.get('message')}" if c.get("message")
                              else str(c.get("reason") or c.get("type")) for c in failing))
    return f" ({'; '.join(said)})" if said else ""


def compute_domains(ctx: StatusContext) -> None:
    if not any(o.kind == "ComputeDomain" for o in ctx.compiled.objects):
        return
    if not ctx.state.has("resource.nvidia.com", "ComputeDomain"):
        ctx.skip("compute-domains", "ComputeDomains")
        return
    gates = ctx.compiled.driver_values.get("featureGates") or {}
    host_imex = isinstance(gates, dict) and gates.get("HostManagedIMEXDaemon") is True
    line = parse_driver_version(ctx.compiled.cluster.spec.dra_driver.version)
    ns = ctx.compiled.cluster.spec.dra_driver.namespace
    for live in _rendered(ctx, "ComputeDomain"):
        status = live.status
        down = [n.get("name") for n in status.get("nodes") or [] if isinstance(n, dict) and n.get("status") != "Ready"]
        if status.get("status") == "Ready":
            ctx.add("compute-domains", "ok", f"{live.label} is Ready on {len(status.get('nodes') or [])} node(s)")
        elif down:
            fix = ("HostManagedIMEXDaemon is on: the host's nvidia-imex service must run on those nodes (`systemctl status nvidia-imex`)"
                   if host_imex else f"the IMEX daemon pods of the domain are not ready: `kubectl get pods -n {ns} -o wide` "
                   f"(driver {line.id}); multi-node NVLink needs the nodes in one NVLink clique")
            ctx.add("compute-domains", "fail", f"{live.label} is NotReady: node(s) {names([str(d) for d in down])} NotReady", fix,
                    live, ("status", "nodes"))
        else:
            ctx.add("compute-domains", "warn", f"{live.label} has no ready status yet: no pod using its channel is scheduled",
                    "the domain forms when its workload's pods land; `kubectl get pods` of the workload", live)


def placement(ctx: StatusContext, plan: AllocationPlan | None) -> None:
    if plan is None or not plan.pods:
        return
    if plan.inventory == "synthesized":
        ctx.skip("placement", "ResourceSlices")  # planned on the devices the intents describe, not the cluster's
        return
    if plan.feasible:
        ctx.add("placement", "ok", f"all {len(plan.pods)} pod(s) of the fleet fit the devices of the running cluster")
        return
    workloads = sorted({p.workload for p in plan.unplaced})
    ctx.add("placement", "fail", f"{len(plan.unplaced)} of {len(plan.pods)} pod(s) do not fit the running cluster: {names(workloads)}",
            f"`gpuc plan FLEET --cluster {ctx.compiled.name}` with the same state shows why and whose claims hold the devices")


CHECKS = (claims, nim, compute_domains)
