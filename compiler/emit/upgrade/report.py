"""The plan as people read it (Markdown: plan.md, and what `gpuc upgrade` prints) and as programs do (JSON)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from .model import ClusterPlan, Step

FENCE = "`" * 3
MAX_PODS = 20


def transition_block(step: Step) -> str:
    """What the step adds under `spec:` of the Cluster intent (or says to remove)."""
    if step.transition is None:
        return "(remove spec.transition: this step is the intent as written)\n"
    return yaml.safe_dump({"transition": step.transition}, sort_keys=False, default_flow_style=False)


def _indented(text: str, pad: str = "  ") -> str:
    return "".join(pad + line + "\n" for line in text.splitlines())


def _pods(step: Step) -> list[str]:
    by_fate: dict[str, list[str]] = {}
    for p in step.pods:
        by_fate.setdefault(p.fate, []).append(p.pod + (f" ({p.why})" if p.why and p.fate == "restarted" else ""))
    out = []
    for fate, label in (("kept", "keep running"), ("restarted", "restart"), ("waiting", "wait, Pending (plan.json says why)"), ("placed", "start")):
        pods = by_fate.get(fate, [])
        if pods:
            shown = ", ".join(pods[:MAX_PODS]) + (f" and {len(pods) - MAX_PODS} more" if len(pods) > MAX_PODS else "")
            out.append(f"- {len(pods)} pod(s) {label}: {shown}")
    return out


def cluster_markdown(plan: ClusterPlan, fleet: str, cluster_file: str) -> str:
    if not plan.staged:
        return f"## {plan.cluster}\n\nThe change from `{plan.base}` is safe as one commit: render it and merge it.\n"
    lines = [f"## {plan.cluster}: {len(plan.steps)} step{'s' if len(plan.steps) > 1 else ''}", "",
             f"The change from `{plan.base}` cannot be applied as one commit:", ""]
    lines += [f"- {why}" for why in plan.why]
    if len(plan.steps) == 1:
        lines += ["", "It is one commit, but one to merge only once every check under *before committing it* holds; render it with "
                  f"`gpuc render {fleet} -o rendered` and wait until every check under *done when* holds.", ""]
    else:
        lines += ["", f"Commit the steps in order, one pull request each, starting from the fleet as the cluster runs it (`{plan.base}`): "
                  f"each step but the last adds `spec.transition` to `{cluster_file}` (and sets the fields it names); the last "
                  f"step is the change itself, without `spec.transition`. Render each with `gpuc render {fleet} -o rendered`, "
                  "merge it, and wait until every check under *done when* holds before the next. The rendered tree of each step "
                  "is in `step-N/rendered/` beside this file.", ""]
    for step in plan.steps:
        lines += [f"### Step {step.number} of {len(plan.steps)}: {step.title}", ""]
        if step.transition is None:
            lines += ["Commit the change itself (the intents as you want them), with no `spec.transition`.", ""]
        else:
            if step.intent:
                lines += ["Set in the Cluster intent as it runs now:", ""] + [f"- `{k}: {v}`" for k, v in step.intent.items()] + [""]
            lines += ["Add under `spec:` of the Cluster intent as it runs now:", "", FENCE + "yaml", transition_block(step).rstrip("\n"),
                      FENCE, ""]
        if step.before:
            lines += ["Before committing it:", ""] + [f"- [ ] {c.text}" for c in step.before] + [""]
        lines += ["What it disrupts:", ""] + ([f"- {d}" for d in step.disrupts] or ["- nothing: no running pod loses its GPUs"]) + [""]
        pods = _pods(step)
        if pods:
            lines += ["gpuc's pods after it:", ""] + pods + [""]
        if step.changes:
            lines += ["What it changes:", ""] + [f"- {c}" for c in step.changes[:40]]
            lines += ([f"- ... and {len(step.changes) - 40} more (plan.json)"] if len(step.changes) > 40 else []) + [""]
        lines += ["Done when:", ""] + [f"- [ ] {c.text}" for c in step.done] + [""]
    return "\n".join(lines)


def markdown(plans: list[ClusterPlan], fleet: str, files: dict[str, str]) -> str:
    head = "# gpuc upgrade\n\n"
    if not plans:
        return head + "No cluster is on both sides of the change.\n"
    return head + "\n".join(cluster_markdown(p, fleet, files.get(p.cluster, "clusters/<cluster>.yaml")) for p in plans)


def as_json(plans: list[ClusterPlan], base: str, commit: str) -> str:
    body: dict[str, Any] = {"base": base, "commit": commit, "clusters": [p.as_dict() for p in plans]}
    return json.dumps(body, indent=2, sort_keys=False)
