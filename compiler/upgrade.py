"""`gpuc upgrade`: the fleet at a base commit and as it is now, and for each cluster whose change one commit cannot
take, the steps between them, each compiled, placed after the one before and checked for hazards against it.

This module only orchestrates (like pipeline.py, whose compile it calls for every side and step): what the hazards
are and which steps answer them is emit.upgrade's, what runs after a step is place.succession's.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .check.gate import CompiledFleet
from .check.model import CheckOptions
from .diagnostics import Diagnostic, InputError
from .emit.diff.compare import ReplacementNote, compare
from .emit.tree import cluster_files
from .emit.upgrade.hazards import hazards
from .emit.upgrade.model import Check, ClusterPlan, PodFate, Step
from .emit.upgrade.shape import busy_pools, shape_of
from .emit.upgrade.steps import GPU_DRIVER, CannotStage, plan_steps
from .load.git import materialize
from .load.state import ClusterState
from .lower.graph import CompiledCluster
from .pipeline import CompileOptions, compile_fleet, validate_clusters
from .place.inventory.synth import node_names
from .place.succession import allocated, holder, place_step


@dataclass
class UpgradePlan:
    base: str
    commit: str
    clusters: list[ClusterPlan] = field(default_factory=list)


def upgrade_fleet(fleet: Path, base_ref: str, only: str | None = None, checks: CheckOptions | None = None,
                  state: ClusterState | None = None) -> UpgradePlan:
    """The plan from the fleet at `base_ref` to the fleet now, per cluster on both sides (or `only`). With `state`, what
    runs now is the running cluster's allocated claims, not the base's plan. Raises InputError when the head does not
    compile, its output is refused, or a change has no staged plan."""
    options = CompileOptions(only=only, checks=checks or CheckOptions(), detail=True, missing_ok=True, state=state,
                             allow_infeasible=True)
    with tempfile.TemporaryDirectory(prefix="gpuc-upgrade-") as tmp:
        base_dir = Path(tmp) / "base"
        existed, commit = materialize(fleet, base_ref, base_dir)
        if not existed:
            raise InputError([Diagnostic(str(fleet), 0, "--base", f"the fleet does not exist at {base_ref}",
                                         "name a commit where the fleet directory exists (the one the running clusters were synced from)")])
        if state is not None and only is not None:
            _agrees(state, base_dir, only, base_ref)
        head = compile_fleet(fleet, options)
        base = compile_fleet(base_dir, options)
        _refuse_failures(head, "the fleet")
        names = sorted(n for n in head.clusters if n in base.clusters and (only is None or n == only))
        if only is not None and only not in names:
            raise InputError([Diagnostic(str(fleet), 0, "--cluster", f"cluster '{only}' is not in the fleet both now and at {base_ref}",
                                         f"clusters on both sides: {', '.join(sorted(set(head.clusters) & set(base.clusters))) or '(none)'}")])
        plan = UpgradePlan(base_ref, commit)
        for name in names:
            plan.clusters.append(_cluster_plan(base_dir, Path(tmp), name, base, head, base_ref, state))
    return plan


def _refuse_failures(compiled: CompiledFleet, where: str) -> None:
    problems = [d for o in compiled.clusters.values() for d in [*o.infeasible, *o.rejected] if o.compiled is None or o.rejected]
    if problems:
        raise InputError(problems)


def _cluster_plan(base_dir: Path, tmp: Path, name: str, base: CompiledFleet, head: CompiledFleet, ref: str,
                  state: ClusterState | None) -> ClusterPlan:
    was, now = base.clusters[name], head.clusters[name]
    if was.compiled is None:
        raise InputError([Diagnostic(f"{ref}:{d.file}", d.line, d.path, f"(at the base) {d.message}", d.hint) for d in was.infeasible])
    assert now.compiled is not None
    before, after = shape_of(was.compiled), shape_of(now.compiled)
    busy = busy_pools(before, was.placement)
    found = hazards(before, after, busy)
    intent = head.fleet.clusters[name]
    try:
        steps = plan_steps(before, after, found, busy)
    except CannotStage as exc:
        raise InputError([intent.error(exc.field, exc.message, exc.hint)]) from None
    plan = ClusterPlan(name, tuple(dict.fromkeys(h.kind for h in found)), [h.message for h in found], steps, ref)
    if not steps:
        return plan
    running = state if state is not None else ClusterState(allocated(was.compiled, was.placement) if was.placement else [],
                                                           (f"the plan of {ref}",))
    previous_fleet, previous_shape = base, before
    for step in steps:
        compiled = head if step.transition is None else _compile_step(base_dir, tmp / f"step-{step.number}", name, step)
        outcome = compiled.clusters[name]
        if outcome.compiled is None or outcome.rejected:
            raise AssertionError(f"step {step.number} of {name}'s plan does not compile: {[*outcome.infeasible, *outcome.rejected]}")
        shape = shape_of(outcome.compiled)
        left = [h for h in hazards(previous_shape, shape, busy) if h.kind not in step.answers]
        if left:  # the steps are built so that none is left: a plan that has one is gpuc's bug, never the user's
            raise AssertionError(f"step {step.number} of {name}'s plan keeps a hazard: {left}")
        step.files = cluster_files(outcome.compiled)
        step.done[:0] = _relabel(previous_fleet.clusters[name].compiled, outcome.compiled)
        # what the step's own compile says of pods it cannot place assumes nothing runs: the succession below knows better
        step.warnings = [d.message for d in outcome.warnings if not d.message.startswith("(step ")]
        drained = {n for c in step.before if c.kind == "no-gpu-pods" for n in c.target["nodes"]}
        remade = frozenset(p for p in shape.pools if (p in previous_shape.pools and shape.pools[p].mig != previous_shape.pools[p].mig)
                           or drained & set(shape.pools[p].nodes))
        placed = place_step(outcome.compiled, running, remade)
        step.changes, replaced = _changes(previous_fleet, compiled, name, ref)
        step.disrupts += [f"{note.object} is replaced: {note.effect}" for note in replaced]
        step.pods = _fates(running, placed, _workloads_of(outcome.compiled, replaced))
        running, previous_fleet, previous_shape, busy = placed.state, compiled, shape, busy_pools(shape, placed.plan)
    return plan


def _agrees(state: ClusterState, base_dir: Path, cluster: str, ref: str) -> None:
    """The running cluster is the base the plan starts from: DRA devices published on a pool the base keeps off DRA
    mean --base names another commit than the one the cluster was synced from (or the export is of another cluster)."""
    _, resolved, _ = validate_clusters(base_dir)
    base = resolved.get(cluster)
    if base is None:
        return
    off = {node: p for p in base.pools if not (p.dra and base.driver_runs) for node in node_names(p)}
    for s in state.of("resource.k8s.io", "ResourceSlice"):
        node = str(s.spec.get("nodeName") or (s.spec.get("pool") or {}).get("name") or "")
        if s.spec.get("driver") == GPU_DRIVER and node in off:
            pool = off[node]
            said = "is allocated by the device plugin" if pool.device_plugin else "has no DRA driver"
            raise InputError([s.diagnostic(
                f"the running cluster publishes {GPU_DRIVER} devices on node {node}, but at {ref} pool {pool.name} {said}: the "
                "plan would start from a cluster that is not the one running", "give --base the commit the cluster was last "
                "synced from (the Argo CD Application's sync revision), or export this cluster's state again", path=("spec", "driver"))])


def _compile_step(base_dir: Path, where: Path, cluster: str, step: Step) -> CompiledFleet:
    """The fleet as the cluster runs it (the base), with the step's fields set and its transition under the cluster's
    spec: what the user commits for the step."""
    shutil.copytree(base_dir, where, symlinks=True)
    path, index = cluster_document(where, cluster)
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    docs[index] = with_step(docs[index], step)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return compile_fleet(where, CompileOptions(only=cluster, detail=True))


def with_step(doc: dict[str, Any], step: Step) -> dict[str, Any]:
    """A Cluster document with the step's fields set and its transition under spec."""
    out = copy.deepcopy(doc)
    for dotted, value in step.intent.items():
        *parents, leaf = dotted.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    out["spec"]["transition"] = step.transition
    return out


def cluster_document(fleet: Path, cluster: str) -> tuple[Path, int]:
    """The file and document index of a cluster's intent."""
    files, _, _ = validate_clusters(fleet)
    source = files.clusters[cluster].source
    return fleet / source.file, source.index


def _fates(before: ClusterState, placed, replaced: dict[str, str]) -> list[PodFate]:
    """What the step does to each of gpuc's pods; `replaced`: workloads whose objects the step replaces, and why their
    pods restart even where their GPU claims stay."""
    claims = before.of("resource.k8s.io", "ResourceClaim")
    held = {holder(c) for c in claims if holder(c)}
    allocated_before = {f"{c.namespace}/{c.name}" for c in claims}
    out = [PodFate(pod, workload, "restarted", replaced[workload]) if workload in replaced else
           PodFate(pod, workload, "kept", "runs on: nobody serves its node during this step, so nothing new is allocated there")
           for pod, workload in placed.carried]
    for pod in placed.plan.pods:
        key = f"{pod.workload.split('/')[0]}/{pod.pod}"
        if pod.running and pod.workload in replaced:
            out.append(PodFate(key, pod.workload, "restarted", replaced[pod.workload], pod.node or ""))
        elif pod.running or (pod.node is not None and _on_shared_claims(pod, allocated_before)):
            out.append(PodFate(key, pod.workload, "kept", "", pod.node or ""))
        elif pod.node is not None:
            out.append(PodFate(key, pod.workload, "restarted" if pod.pod in held else "placed",
                               "its claim changed or its devices are gone" if pod.pod in held else "", pod.node))
        else:
            out.append(PodFate(key, pod.workload, "waiting", ("restarted, then " if pod.pod in held else "") + pod.reason))
    return sorted(out, key=lambda f: f.pod)


def _relabel(before: CompiledCluster | None, after: CompiledCluster) -> list[Check]:
    """Labels a step changes on pools whose nodes gpuc does not patch (no nodeNames): the node provisioner applies them
    (node-labels.yaml), and the step is not done until the nodes carry them."""
    out = []
    for pool in after.cluster.pools:
        if pool.spec.node_names:
            continue  # Node patches in the tree: the sync applies them
        old = (before.node_labels if before is not None else {}).get(pool.name, {})
        new = after.node_labels.get(pool.name, {})
        if old != new:
            wanted = {k: new.get(k) for k in sorted(set(old) | set(new))}  # None: the label goes
            text = ", ".join(f"{k}={v}" if v is not None else f"no {k}" for k, v in wanted.items() if old.get(k) != v)
            out.append(Check(f"the nodes of pool {pool.name} carry {text} (node-labels.yaml: set by the node provisioner, or "
                             "`kubectl label node NODE ...`)", "node-labels", {"nodes": node_names(pool), "labels": wanted}))
    return out


def _on_shared_claims(pod, allocated: set[str]) -> bool:
    """A pod whose GPUs all come from shared claims that stay allocated: it runs on where they are."""
    gpu = [c for c in pod.claims if c.label == "gpu"]
    return bool(gpu) and all(c.shared and c.claim in allocated for c in gpu)


def _changes(previous: CompiledFleet, compiled: CompiledFleet, name: str, ref: str) -> tuple[list[str], list[ReplacementNote]]:
    """gpuc diff's account of the step: the objects and releases it changes, and the replacements among them."""
    diff = compare(previous, compiled, ref)
    cluster = next((c for c in diff.clusters if c.name == name), None)
    if cluster is None:
        return [], []
    lines = [f"{o.status}: {o.ref}" for o in cluster.objects]
    lines += [f"release {r.name}: {r.status}" for r in cluster.releases]
    return lines, list(cluster.replacements)


def _workloads_of(compiled: CompiledCluster, replaced: list[ReplacementNote]) -> dict[str, str]:
    """ns/workload -> why its pods restart, for each replaced object that belongs to a workload."""
    by_ref = {f"{o.kind} {o.namespace + '/' if o.namespace else ''}{o.name}": o for o in compiled.objects}
    out: dict[str, str] = {}
    for note in replaced:
        new_name = note.object.rpartition(" -> ")[2] if " -> " in note.object else note.object.rpartition(" ")[2]
        kind = note.object.split(" ", 1)[0]
        obj = next((o for ref, o in by_ref.items() if ref.startswith(kind + " ") and ref.endswith("/" + new_name)), None)
        if obj is not None and obj.component.startswith("workload/"):
            out.setdefault(obj.component.removeprefix("workload/"), f"its {kind} is replaced")
    return out
