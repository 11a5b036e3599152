"""`gpuc plan` as text: per cluster, where each pod goes, how full each pool gets, and why pods do not fit."""

from __future__ import annotations

from ..place.allocator import AllocationPlan, PodOutcome
from ..place.allocator.result import PLACEMENT_NOTES


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _devices(pod: PodOutcome) -> str:
    parts = []
    for claim in pod.claims:
        names = ", ".join((d.device if d.pool == pod.node else f"{d.pool}/{d.device}")
                          + (f" ({', '.join(f'{amount} {name}' for name, amount in d.consumed)})" if d.consumed else "")
                          for d in claim.devices)
        shared = f" (shared claim {claim.claim.split('/')[-1]})" if claim.shared else ""
        parts.append(f"{claim.label}: {names}{shared}")
    return "; ".join(parts)


def _percent(used: int, total: int) -> str:
    return f"{used} ({round(100 * used / total)}%)" if total else str(used)


def plan_text(plan: AllocationPlan) -> str:
    placed = sum(1 for p in plan.pods if p.placed)
    source = "synthesized inventory" if plan.inventory == "synthesized" else f"inventory from {plan.inventory}"
    lines = [f"cluster {plan.cluster}: Kubernetes {plan.kubernetes}, DRA driver {plan.driver}, {source} "
             f"({plan.nodes} nodes, {plan.devices} devices)",
             f"  {placed} of {len(plan.pods)} pods placed" + ("" if plan.feasible else f", {len(plan.pods) - placed} cannot be placed")]
    if plan.running:
        lines.append("  " + in_use_before(plan))
    if plan.pods:
        rows = [["WORKLOAD", "POD", "NODE", "DEVICES"]]
        rows += [[p.workload, p.pod, (p.node or "-") + (" (running)" if p.running else ""),
                  _devices(p) if p.placed else "(cannot be placed)"] for p in plan.pods]
        lines += [""] + _table(rows)
    pool_rows = [["POOL", "NODES", "GPUS", "USED BEFORE", "USED AFTER", "DEVICES USED"]]
    for u in plan.pools:
        if u.allocation != "dra":
            pool_rows.append([u.pool, str(u.nodes), str(u.gpus), "-", "device plugin, not planned", "-"])
        else:
            pool_rows.append([u.pool, str(u.nodes), str(u.gpus), _percent(u.gpus_used_before, u.gpus),
                              _percent(u.gpus_used, u.gpus), f"{u.devices_used}/{u.devices}"])
    lines += [""] + _table(pool_rows)
    if not plan.feasible:
        lines += ["", "  cannot be placed:"]
        lines += [f"    {p.workload} {p.pod}: {p.reason}" for p in plan.unplaced]
    if plan.headroom is not None:
        lines += [""] + headroom_lines(plan.headroom)
    if plan.budgets:
        lines += [""] + budget_lines(plan.budgets)
    lines += [""] + [f"  note: {note}" for note in PLACEMENT_NOTES]
    return "\n".join(lines) + "\n"


def additions_text(additions) -> str:
    """"2 nodes to pool h100 (16 GPUs)", joined with " + "."""
    return " + ".join(f"{a.nodes} node{'s' if a.nodes != 1 else ''} to pool {a.pool} ({a.gpus} GPUs)" for a in additions)


def headroom_lines(headroom) -> list[str]:
    """What is left per pool, and for pods that cannot be placed, the smallest addition that places them (place.headroom)."""
    rows = [["POOL", "FREE GPUS", "FREE DEVICES", "SHAREABLE MEMORY LEFT"]]
    rows += [[f.pool, str(f.gpus), f"{f.devices}" + (" MIG slices" if f.mig else ""), f.shareable or "-"] for f in headroom.free]
    lines = ["  headroom after the plan:"] + _table(rows, "    ") if headroom.free else []
    if headroom.recommended:
        checked = "" if headroom.verified else " (not re-planned with the nodes in place)"
        lines.append(f"  to place the {headroom.pending} pod(s) that do not fit, add {additions_text(headroom.recommended)}{checked}")
        if headroom.combined:
            lines.append("    no one pool's nodes hold them all: the pools together do")
        lines += [f"    or {additions_text([a])}" for a in headroom.options[1:]]
    for pod, why in headroom.stuck:
        lines.append(f"  no addition places {pod}: {why}")
    return lines


BUDGETS_HEAD = "team budgets (a ResourceQuota per namespace: the API server refuses the claim that goes over):"


def budget_lines(uses) -> list[str]:
    """Per team and limit what the claims use, the limit and what is left (check.budgets.BudgetUse)."""
    rows = [["NAMESPACE", "LIMIT ON", "USED", "LIMIT", "LEFT", ""]]
    for u in uses:
        note = f"not listed: held at 0 beside {u.limit.covers}" if u.limit.covers else ""
        rows.append([u.namespace, u.limit.what, str(u.used), str(u.limit.limit),
                     f"over by {-u.left}" if u.over else str(u.left), note])
    return [f"  {BUDGETS_HEAD}"] + _table(rows, "    ")


def in_use_before(plan: AllocationPlan, shown: int = 5) -> str:
    """What the running cluster already held when the plan started: other claims' devices, and gpuc's own
    claims (their pods run and stay where they are; only what is not allocated yet is planned)."""
    devices = sum(n for _, n in plan.held)
    names = ", ".join(c for c, _ in plan.held[:shown]) + (f" and {len(plan.held) - shown} more" if len(plan.held) > shown else "")
    foreign = (f"{devices} device(s) held by {len(plan.held)} claim(s) gpuc does not manage ({names})" if plan.held
               else "no device held by a claim gpuc does not manage")
    running = sum(1 for p in plan.pods if p.running)
    return (f"in use before: {foreign}; {plan.own_in_use} of gpuc's own claim(s) allocated, "
            f"{running} running pod(s) kept where they are")


def unplaced_groups(plan: AllocationPlan) -> list[tuple[str, str, int]]:
    """(workload, reason, pods) for the pods that cannot be placed: a workload's replicas usually fail alike,
    and one line per pod makes a report unreadable (and too long for a PR comment) at hundreds of replicas."""
    counts: dict[tuple[str, str], int] = {}
    for p in plan.unplaced:
        counts[(p.workload, p.reason)] = counts.get((p.workload, p.reason), 0) + 1
    return [(w, reason, n) for (w, reason), n in counts.items()]


def plan_markdown(plan: AllocationPlan, before: AllocationPlan | None = None, list_unplaced: bool = True) -> str:
    """Per-pool utilisation and the pods that cannot be placed, as Markdown for a pull-request comment.

    With `before`, each pool shows its GPUs in use before and after the change. A report that lists the
    unplaced pods elsewhere passes `list_unplaced=False`."""
    lines = [f"**{plan.cluster}**: {sum(1 for p in plan.pods if p.placed)} of {len(plan.pods)} pods placed",
             "", "| pool | nodes | GPUs | in use | utilisation |", "|---|---|---|---|---|"]
    old = {u.pool: u for u in before.pools} if before else {}
    for u in plan.pools:
        if u.allocation != "dra":
            lines.append(f"| {u.pool} | {u.nodes} | {u.gpus} | device plugin | - |")
            continue
        prior = old.get(u.pool)
        used = f"{prior.gpus_used} -> {u.gpus_used}" if prior is not None and prior.gpus_used != u.gpus_used else str(u.gpus_used)
        lines.append(f"| {u.pool} | {u.nodes} | {u.gpus} | {used} | {_bar(u.gpus_used, u.gpus)} |")
    if plan.unplaced and list_unplaced:
        groups = unplaced_groups(plan)
        lines += ["", f"Cannot be placed ({len(plan.unplaced)}):"]
        lines += [f"- `{w}` {n} pod(s): {reason}" for w, reason, n in groups[:20]]
        if len(groups) > 20:
            lines.append(f"- ... and {len(groups) - 20} more (`gpuc plan` lists them all)")
    return "\n".join(lines) + "\n"


def _bar(used: int, total: int, width: int = 10) -> str:
    if not total:
        return "-"
    filled = round(width * used / total)
    return f"`{'#' * filled}{'.' * (width - filled)}` {round(100 * used / total)}%"
