"""`gpuc diff` reports: Markdown for a pull-request comment (summary first, details folded) and JSON."""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

from ...check.budgets import CLAIMS
from ...diagnostics import Diagnostic
from ..plan_report import additions_text, plan_markdown, unplaced_groups
from .compare import ClusterDiff, FleetDiff, Pair
from .fields import MISSING, FieldChange

MAX_FIELDS_PER_OBJECT = 40
MAX_LIST = 50  # lines of a summary list, or entries of a details section
MAX_PER_CLUSTER = 20  # a cluster's lines under "Does not fit" and under replacements
MAX_ROWS = 200  # changed clusters in the summary table
MAX_CHARS = 60_000  # the whole comment; GitHub's limit is 65,536


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


MAX_INLINE = 120  # longer values (a mig-parted config, a CEL selector, chart values) read better as a diff
MAX_DIFF_LINES = 60
FENCE = "`" * 3


def _text(v: Any) -> str:
    if v is MISSING:
        return ""
    if isinstance(v, (dict, list)):
        return yaml.safe_dump(v, sort_keys=True, default_flow_style=False, width=100).rstrip("\n")
    return v if isinstance(v, str) else json.dumps(v)


def _long(c: FieldChange) -> bool:
    return any(v is not MISSING and ("\n" in _text(v) or len(_value(v)) > MAX_INLINE) for v in (c.old, c.new))


def _unified(c: FieldChange, indent: str) -> list[str]:
    """A long or multi-line value as a unified diff in a fenced block under its list item, not cut JSON."""
    old, new = _text(c.old).splitlines(), _text(c.new).splitlines()
    body = list(difflib.unified_diff(old, new, "before", "after", lineterm="", n=2))[2:] or [f" {line}" for line in new]
    if len(body) > MAX_DIFF_LINES:
        body = body[:MAX_DIFF_LINES] + [f" ... {len(body) - MAX_DIFF_LINES} more diff line(s) (gpuc diff --output json)"]
    what = "added" if c.old is MISSING else "removed" if c.new is MISSING else "changed"
    pad = indent + "  "
    return ([f"{indent}- `{c.path}` {what}:", "", f"{pad}{FENCE}diff"] + [pad + line.replace(FENCE, "'''") for line in body]
            + [f"{pad}{FENCE}", ""])


def _fields(changes, indent: str = "  ") -> list[str]:
    blocks = [_unified(c, indent) if _long(c) else [f"{indent}- {_field_line(c)}"] for c in changes]
    out = [line for block in blocks[:MAX_FIELDS_PER_OBJECT] for line in block]
    return out + ([_more(len(blocks) - MAX_FIELDS_PER_OBJECT, indent)] if len(blocks) > MAX_FIELDS_PER_OBJECT else [])


def _capped(lines: list[str], most: int = MAX_LIST, indent: str = "") -> list[str]:
    """At most `most` list lines; the JSON output has them all."""
    return lines if len(lines) <= most else lines[:most] + [_more(len(lines) - most, indent)]


def _more(n: int, indent: str = "") -> str:
    return f"{indent}- ... and {n} more (run `gpuc diff --output json` for all)"


def _counts(items, statuses) -> str:
    parts = [f"{sum(1 for i in items if i.status == s)} {s}" for s in statuses if any(i.status == s for i in items)]
    return ", ".join(parts) or "-"


def _moved(values: dict[str, Pair], quiet: bool = False) -> str:
    """Changed values with their delta; unchanged ones only when nothing changed (none at all when `quiet`)."""
    def n(v: int | None) -> str:
        return "?" if v is None else str(v)

    moved = {label: v for label, v in values.items() if v[0] != v[1]}
    if not moved:
        return "-" if quiet else "<br>".join(f"{label} {n(after)}" for label, (_, after) in values.items()) or "-"
    return "<br>".join(f"{label} {n(b)} -> {n(a)}" + (f" ({a - b:+d})" if a is not None and b is not None else "")
                       for label, (b, a) in moved.items())


def _intent(c: ClusterDiff) -> str:
    """GPUs each pool offers where that moved, and how many intent fields changed."""
    parts = [] if _moved(c.capacity, quiet=True) == "-" else [_moved(c.capacity, quiet=True)]
    if c.intent:
        parts.append(f"{len(c.intent)} field(s) changed")
    return "<br>".join(parts) or "-"


def _releases(c: ClusterDiff) -> str:
    """Helm releases in the summary: what moved in the chart, and whether its values did."""
    parts = []
    for r in c.releases:
        if r.status != "changed":
            parts.append(f"{r.name} {r.status}")
            continue
        moved = [f"{f.path} {f.old} -> {f.new}" for f in r.fields if f.path in ("chart", "repository", "version", "namespace")]
        moved += ["values"] if any(f.path.startswith("values") for f in r.fields) else []
        parts.append(f"{r.name}: {', '.join(moved)}")
    return "<br>".join(parts) or "-"


def _feasible(flag: bool | None, compiles: bool = True) -> str:
    if not compiles:
        return "**does not compile**"
    return {True: "fits", False: "**does not fit**", None: "-"}[flag]


def _is_budget(d: Diagnostic) -> bool:
    return d.path.startswith("spec.budgets")


def verdict(c: ClusterDiff) -> tuple[bool, list[str]]:
    """One verdict on the head of a cluster, counting everything `gpuc render` counts: (whether it applies as it is,
    the reasons: every pod fits, every team stays within its budget, the checks accept the output; or why not)."""
    plan, cost = c.plans[1], c.cost
    if c.status == "removed":
        return True, ["removed"]
    if c.problems:  # sizing found no pool for a workload: nothing to place it on
        return False, [f"**does not fit** ({len(c.problems)} workload finding(s) below)"]
    reasons = []
    if c.feasible[1] is False:
        reasons.append("**does not fit**" + (f": add {additions_text(cost.add)}" if cost is not None and cost.add else ""))
    over = [b for b in cost.budgets if b.over] if cost is not None else []
    if over:
        reasons.append("**over budget**: " + "; ".join(f"`{b.namespace}` {_limit(b)} {b.after} of {b.limit}" for b in over))
    refused = [d for d in c.rejected if not _is_budget(d)]
    if refused:
        reasons.append(f"**output refused**: {len(refused)} finding(s)")
    if reasons:
        return False, reasons
    return True, ["fits and within budgets" if plan is not None and plan.budgets else "fits"]


def _verdict_cell(c: ClusterDiff, base_compiles: bool) -> str:
    return f"{_feasible(c.feasible[0], base_compiles)} -> {'; '.join(verdict(c)[1]) if c.status != 'removed' else '-'}"


def _problem(d) -> str:
    where = f"{d.file}:{d.line}" if d.line else d.file
    return f"`{where}` {d.path}: {d.message}"


def _blocked(c: ClusterDiff) -> list[str]:
    """Why the cluster would not render: compile findings, refused output, then unplaceable pods folded by
    workload and reason."""
    lines = [f"- **{c.name}**: {_problem(p)}" for p in c.problems + c.rejected]
    if c.plans[1] is not None:
        lines += [f"- **{c.name}**: {n} pod(s) of `{w}` cannot be placed: {reason}" for w, reason, n in unplaced_groups(c.plans[1])]
    return lines


def _summary(diff: FleetDiff, changed: list[ClusterDiff]) -> list[str]:
    lines = []
    if diff.base_problems:
        lines += ["### The base does not compile",
                  f"The fleet at `{diff.base}` has {len(diff.base_problems)} finding(s); each cluster is compared against "
                  "an unknown before.", ""]
        lines += _capped([f"- {_problem(d)}" for d in diff.base_problems]) + [""]
    lines += ["| cluster | status | cluster intent (GPUs offered) | workloads | objects | Helm releases | devices requested "
              "| verdict (fits before -> after) | replacements |", "|---|---|---|---|---|---|---|---|---|"]
    rows = [f"| {c.name} | {c.status} | {_intent(c)} | {_counts(c.workloads, ('added', 'changed', 'removed'))} | "
            f"{_counts(c.objects, ('added', 'changed', 'replaced', 'removed'))} | {_releases(c)} | {_moved(c.gpus)} | "
            f"{_verdict_cell(c, not diff.base_problems)} | "
            f"{len(c.replacements) or '-'} |"
            for c in changed]
    lines += rows[:MAX_ROWS]
    if len(rows) > MAX_ROWS:
        lines += ["", _more(len(rows) - MAX_ROWS)[2:]]
    blocked = [line for c in changed if not verdict(c)[0] for line in _capped(_blocked(c), MAX_PER_CLUSTER)]
    if blocked:
        lines += ["", "### Does not fit or would be refused (`gpuc render` refuses these clusters)"] + blocked
    replacements = [line for c in changed
                    for line in _capped([f"- **{c.name}** `{r.object}`: {r.effect}" for r in c.replacements], MAX_PER_CLUSTER)]
    if replacements:
        lines += ["", "### Replacements and disruptions (not updated in place)"] + replacements
    staged = [line for c in changed for line in _capped([f"- **{c.name}**: {why}" for why in c.staged], MAX_PER_CLUSTER)]
    if staged:
        lines += ["", "### Not safe as one commit: stage it", "",
                  f"A running cluster cannot take this change in one sync. `gpuc upgrade FLEET --base {diff.base} -o upgrade` "
                  "writes the steps (one commit each, with what to check before and after each):", ""] + staged
    left = [line for c in changed for line in _capped([f"- **{c.name}**: {o}" for o in c.orphans], MAX_PER_CLUSTER)]
    if left:
        lines += ["", "### Left behind after the sync (nothing deletes these)"] + left
    return lines


def _n(v: int | None) -> str:
    return "?" if v is None else str(v)


def _delta(pair) -> str:
    before, after = pair
    if before == after:
        return _n(after)
    sign = f" ({after - before:+d})" if before is not None and after is not None else ""
    return f"{_n(before)} -> {_n(after)}{sign}"


def _limit(b) -> str:
    return "ResourceClaims" if b.key == CLAIMS else f"{b.key} devices"


def budget_text(b) -> str:
    state = f"over by {b.after - b.limit}" if b.over else f"{b.limit - b.after} left"
    held = f" (not listed: held at 0 beside {b.covers})" if b.covers else ""
    return f"namespace `{b.namespace}`: {_limit(b)} {_n(b.before)} -> {b.after} of {b.limit}{held} ({state})"


def cost_lines(changed: list[ClusterDiff]) -> list[str]:
    """The cost table at the top: per cluster and pool what the change takes and what is left; then one verdict per
    cluster (fits and within budgets, or not and why), the budgets it moves, and what to add when it no longer fits."""
    rows, notes = [], []
    for c in changed:
        cost = c.cost
        if cost is None:
            continue
        ok, reasons = verdict(c)
        rows += [f"| {c.name} | {p.pool} | {_delta(p.gpus)} | {_delta(p.devices)} {'MIG slices' if p.mig else 'devices'} | "
                 f"{_n(p.free)} |" for p in cost.pools if p.changed or cost.fits is False]
        if cost.changed or not ok:
            notes.append(f"- **{c.name}**: {'; '.join(reasons)}")
        if cost.stuck:
            notes.append(f"  - {cost.stuck} pod(s) fit no added node (`gpuc plan` says why)")
        notes += [f"  - budget {budget_text(b)}" for b in cost.budgets]
    if not rows and not notes:
        return []
    table = ["| cluster | pool | GPUs taken | devices taken | free GPUs after |", "|---|---|---|---|---|"] if rows else []
    return ["### Cost of this change", ""] + table + _capped(rows, MAX_ROWS) + ([""] if rows and notes else []) + notes + [""]


def _details(c: ClusterDiff) -> list[str]:
    if not (c.intent or c.workloads or c.objects or c.releases or c.prunes):
        return []
    lines = ["", f"<details><summary>{c.name}: details</summary>", ""]
    if c.intent:
        lines += ["#### Cluster intent"] + _fields(c.intent, "")
    for title, items in (("Workloads", [(w.status, w.key, w.fields) for w in c.workloads]),
                         ("Objects", [(o.status, o.ref, o.fields) for o in c.objects]),
                         ("Helm releases", [(r.status, r.name, r.fields) for r in c.releases])):
        if items:
            lines.append(f"#### {title}")
            for status, key, fields in items[:MAX_LIST]:
                lines += [f"- {status} `{key}`"] + _fields(fields)
            lines += [_more(len(items) - MAX_LIST)] if len(items) > MAX_LIST else []
    if c.prunes:
        lines += ["#### Deleted by the sync (Argo CD prunes them)"] + _capped([f"- {p}" for p in c.prunes])
    return lines + ["", "</details>"]


def markdown(diff: FleetDiff, gated: list[str] | None = None) -> str:
    """Summary first, then capacity, then details; cut to fit a pull-request comment, details first. `gated`:
    the --fail-on conditions that hold, said at the top so the reviewer sees why CI is red."""
    commit = f" ({diff.commit})" if diff.commit and diff.commit != diff.base else ""
    lines = [f"## gpuc diff against `{diff.base}`{commit}", ""]
    if gated:
        lines += [f"> **`--fail-on` tripped**: {'; '.join(f'`{g}`: {diff.why(g)}' for g in gated)}", ""]
    changed = [c for c in diff.clusters if c.changed]
    if not changed and not diff.base_problems:
        lines.append("No change to any cluster's compiled objects or intents.")
        return "\n".join(lines) + "\n"
    lines += cost_lines(changed)
    lines += _summary(diff, changed)
    planned = [c for c in changed if c.plans[1] is not None]
    if planned:
        lines += ["", "### Capacity after the change"]
        for c in planned:
            after = c.plans[1]
            assert after is not None
            lines += ["", plan_markdown(after, c.plans[0], list_unplaced=False).rstrip()]
    for c in changed:
        lines += _details(c)
    return _fit(lines, MAX_CHARS)


def _fit(lines: list[str], limit: int) -> str:
    """Whole lines while they fit `limit` (GitHub refuses comments over 65,536 characters). The summary comes
    first, so the cut falls on details; an open <details> is closed and the cut is said."""
    out: list[str] = []
    size, open_details = 0, False
    for i, line in enumerate(lines):
        if size + len(line) + 1 > limit - 400:  # room for the closing lines
            out += (["", "</details>"] if open_details else []) + [
                "", f"*... {len(lines) - i} more line(s) cut to fit a pull-request comment "
                    "(run `gpuc diff --output json` for all)*"]
            break
        out.append(line)
        size += len(line) + 1
        open_details = line.startswith("<details>") or (open_details and line != "</details>")
    return "\n".join(out) + "\n"


def _cluster_json(c: ClusterDiff) -> dict[str, Any]:
    return {
        "cluster": c.name,
        "status": c.status,
        "feasible": {"before": c.feasible[0], "after": c.feasible[1]},
        "problems": [p.as_dict() for p in c.all_problems()],
        "intent": [f.as_dict() for f in c.intent],
        "capacity": {pool: {"before": b, "after": a} for pool, (b, a) in c.capacity.items()},
        "gpusOccupied": {"before": c.occupied[0], "after": c.occupied[1]},
        "cost": c.cost.as_dict() if c.cost is not None else None,
        "pools": [{"pool": u.pool, "gpus": u.gpus,
                   "gpusUsedBefore": _pool_used(c.plans[0], u.pool), "gpusUsedAfter": u.gpus_used}
                  for u in (c.plans[1].pools if c.plans[1] is not None else ())],
        "devices": {label: {"before": b, "after": a} for label, (b, a) in c.gpus.items()},
        "replacements": [{"object": r.object, "effect": r.effect} for r in c.replacements],
        "workloads": [{"workload": w.key, "status": w.status, "fields": [f.as_dict() for f in w.fields]} for w in c.workloads],
        "objects": [{"kind": o.kind, "namespace": o.namespace, "name": o.name, "oldName": o.old_name or None,
                     "status": o.status, "fields": [f.as_dict() for f in o.fields]} for o in c.objects],
        "releases": [{"release": r.name, "status": r.status, "fields": [f.as_dict() for f in r.fields]} for r in c.releases],
        "staged": c.staged,
        "prunes": c.prunes,
        "orphans": c.orphans,
    }


def _pool_used(plan, pool: str) -> int | None:
    if plan is None:
        return None
    return next((u.gpus_used for u in plan.pools if u.pool == pool), None)


def as_json(diff: FleetDiff, gated: list[str]) -> str:
    return json.dumps({"base": diff.base, "baseCommit": diff.commit, "baseProblems": [d.as_dict() for d in diff.base_problems],
                       "changed": diff.changed, "conditions": sorted(diff.conditions()),
                       "gated": gated, "clusters": [_cluster_json(c) for c in diff.clusters]}, indent=2, default=str)


def cost_diagnostics(diff: FleetDiff) -> list[Diagnostic]:
    """The cost and the verdict as findings on each changed cluster's intent, for GitHub annotations and SARIF: a warning
    where the head does not fit or takes a namespace over its budget, a note for what it takes otherwise."""
    out = []
    for c in diff.clusters:
        cost = c.cost
        plan = c.plans[1]
        if not c.changed or cost is None or plan is None or not (cost.changed or cost.fits is False):
            continue
        file, line = (c.source.file, c.source.line_of(("metadata", "name"))) if c.source is not None else (c.name, 0)
        pools = "; ".join(f"pool {p.pool}: GPUs {_delta(p.gpus)}, {'MIG slices' if p.mig else 'devices'} {_delta(p.devices)}, "
                          f"{_n(p.free)} GPUs free after" for p in cost.pools if p.changed)
        ok, reasons = verdict(c)
        message = f"cluster {c.name}: {'; '.join(reasons)}".replace("**", "") + (f"; {pools}" if pools else "")
        message += "".join(f"; budget {budget_text(b)}" for b in cost.budgets)
        severity = "warning" if cost.fits is False or any(b.over for b in cost.budgets) else "note"
        out.append(Diagnostic(file, line, "metadata.name", message.replace("`", "'"), "", severity, rule="cost"))  # type: ignore[arg-type]
    return out
