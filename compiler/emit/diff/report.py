"""`gpuc diff` reports: Markdown for a pull-request comment (summary first, details folded) and JSON."""

from __future__ import annotations

import json
from typing import Any

from ..plan_report import plan_markdown
from .compare import ClusterDiff, FleetDiff
from .fields import MISSING, FieldChange

MAX_FIELDS_PER_OBJECT = 40


def _value(v: Any) -> str:
    if v is MISSING:
        return "(none)"
    text = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
    text = text if len(text) <= 120 else text[:117] + "..."
    return "`" + text.replace("`", "'") + "`"


def _field_line(c: FieldChange) -> str:
    if c.old is MISSING:
        return f"`{c.path}`: added {_value(c.new)}"
    if c.new is MISSING:
        return f"`{c.path}`: removed (was {_value(c.old)})"
    return f"`{c.path}`: {_value(c.old)} -> {_value(c.new)}"


def _fields(changes, indent: str = "  ") -> list[str]:
    lines = [f"{indent}- {_field_line(c)}" for c in changes[:MAX_FIELDS_PER_OBJECT]]
    if len(changes) > MAX_FIELDS_PER_OBJECT:
        lines.append(f"{indent}- ... and {len(changes) - MAX_FIELDS_PER_OBJECT} more")
    return lines


def _counts(items, statuses) -> str:
    parts = [f"{sum(1 for i in items if i.status == s)} {s}" for s in statuses if any(i.status == s for i in items)]
    return ", ".join(parts) or "-"


def _gpus(c: ClusterDiff) -> str:
    """Changed demands with their delta; unchanged ones only when nothing changed."""
    def n(v: int | None) -> str:
        return "?" if v is None else str(v)

    moved = {label: v for label, v in c.gpus.items() if v[0] != v[1]}
    if not moved:
        return "<br>".join(f"{label} {n(after)}" for label, (_, after) in c.gpus.items()) or "-"
    return "<br>".join(f"{label} {n(b)} -> {n(a)}" + (f" ({a - b:+d})" if a is not None and b is not None else "")
                       for label, (b, a) in moved.items())


def _feasible(flag: bool | None) -> str:
    return {True: "fits", False: "**does not fit**", None: "-"}[flag]


def markdown(diff: FleetDiff) -> str:
    lines = [f"## gpuc diff against `{diff.base}`", ""]
    changed = [c for c in diff.clusters if c.changed]
    if not changed:
        lines.append("No change to any cluster's compiled objects.")
        return "\n".join(lines) + "\n"
    lines += ["| cluster | status | workloads | objects | devices requested | feasibility | replacements |",
              "|---|---|---|---|---|---|---|"]
    for c in changed:
        feas = f"{_feasible(c.feasible[0])} -> {_feasible(c.feasible[1])}"
        lines.append(f"| {c.name} | {c.status} | {_counts(c.workloads, ('added', 'changed', 'removed'))} | "
                     f"{_counts(c.objects, ('added', 'changed', 'replaced', 'removed'))} | {_gpus(c)} | {feas} | "
                     f"{len(c.replacements) or '-'} |")
    blocked = [c for c in changed if c.feasible[1] is False]
    if blocked:
        lines += ["", "### Does not fit"]
        for c in blocked:
            for p in c.problems:
                lines.append(f"- **{c.name}**: `{p.file}:{p.line}` {p.path}: {p.message}")
    replacements = [(c.name, r) for c in changed for r in c.replacements]
    if replacements:
        lines += ["", "### Replacements (not updated in place)"]
        lines += [f"- **{name}** `{r.object}`: {r.effect}" for name, r in replacements]
    planned = [c for c in changed if c.plans[1] is not None]
    if planned:
        lines += ["", "### Capacity after the change"]
        for c in planned:
            lines += ["", plan_markdown(c.plans[1], c.plans[0]).rstrip()]
    for c in changed:
        lines += ["", f"<details><summary>{c.name}: details</summary>", ""]
        if c.workloads:
            lines.append("#### Workloads")
            for w in c.workloads:
                lines.append(f"- {w.status} `{w.key}`")
                lines += _fields(w.fields)
        if c.objects:
            lines.append("#### Objects")
            for o in c.objects:
                lines.append(f"- {o.status} `{o.ref}`")
                lines += _fields(o.fields)
        if c.releases:
            lines.append("#### Helm releases")
            for r in c.releases:
                lines.append(f"- {r.status} `{r.name}`")
                lines += _fields(r.fields)
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _cluster_json(c: ClusterDiff) -> dict[str, Any]:
    return {
        "cluster": c.name,
        "status": c.status,
        "feasible": {"before": c.feasible[0], "after": c.feasible[1]},
        "problems": [p.as_dict() for p in c.problems],
        "pools": [{"pool": u.pool, "gpus": u.gpus,
                   "gpusUsedBefore": _pool_used(c.plans[0], u.pool), "gpusUsedAfter": u.gpus_used}
                  for u in (c.plans[1].pools if c.plans[1] is not None else ())],
        "devices": {label: {"before": b, "after": a} for label, (b, a) in c.gpus.items()},
        "replacements": [{"object": r.object, "effect": r.effect} for r in c.replacements],
        "workloads": [{"workload": w.key, "status": w.status, "fields": [f.as_dict() for f in w.fields]} for w in c.workloads],
        "objects": [{"kind": o.kind, "namespace": o.namespace, "name": o.name, "oldName": o.old_name or None,
                     "status": o.status, "fields": [f.as_dict() for f in o.fields]} for o in c.objects],
        "releases": [{"release": r.name, "status": r.status, "fields": [f.as_dict() for f in r.fields]} for r in c.releases],
    }


def _pool_used(plan, pool: str) -> int | None:
    if plan is None:
        return None
    return next((u.gpus_used for u in plan.pools if u.pool == pool), None)


def as_json(diff: FleetDiff, gated: list[str]) -> str:
    return json.dumps({"base": diff.base, "changed": diff.changed, "conditions": sorted(diff.conditions()),
                       "gated": gated, "clusters": [_cluster_json(c) for c in diff.clusters]}, indent=2, default=str)
