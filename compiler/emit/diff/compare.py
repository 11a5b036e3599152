"""Compare two compiled fleets: what a reviewer must know about an intent change.

Objects are compared as compiled objects, not text. An object whose content-hashed name changed
(claims, templates, ComputeDomains) is paired with its predecessor by identity and reported as a
replacement; a change to a field the API server refuses to update in place (NIMService
spec.draResources) is reported as a replacement too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...lower.graph import CompiledCluster, HelmRelease, KubeObject
from ...pipeline import Compilation
from .fields import FieldChange, diff_values, touches


@dataclass(frozen=True)
class ObjectChange:
    kind: str
    namespace: str
    name: str
    status: str  # added | removed | changed | replaced
    old_name: str = ""
    fields: tuple[FieldChange, ...] = ()

    @property
    def ref(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        if self.old_name and self.old_name != self.name:
            return f"{self.kind} {where}{self.old_name} -> {self.name}"
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True)
class ReplacementNote:
    object: str
    effect: str


@dataclass(frozen=True)
class WorkloadChange:
    key: str
    status: str  # added | removed | changed
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True)
class ReleaseChange:
    name: str
    status: str
    fields: tuple[FieldChange, ...] = ()


@dataclass
class ClusterDiff:
    name: str
    status: str  # added | removed | changed | unchanged
    workloads: list[WorkloadChange] = field(default_factory=list)
    objects: list[ObjectChange] = field(default_factory=list)
    releases: list[ReleaseChange] = field(default_factory=list)
    replacements: list[ReplacementNote] = field(default_factory=list)
    gpus: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)  # label -> (before, after); None: unknown
    feasible: tuple[bool | None, bool | None] = (None, None)  # None: the cluster does not exist on that side
    problems: list = field(default_factory=list)  # why the new side cannot be compiled or placed
    plans: tuple[Any, Any] = (None, None)  # AllocationPlan before and after, when that side compiled

    @property
    def changed(self) -> bool:
        return self.status != "unchanged"

    @property
    def gpu_increase(self) -> bool:
        return any(after is not None and after > (before or 0) for before, after in self.gpus.values())


@dataclass
class FleetDiff:
    base: str
    clusters: list[ClusterDiff]

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.clusters)

    def conditions(self) -> set[str]:
        """Gateable conditions present in this diff (see `--fail-on`)."""
        out = set()
        if self.changed:
            out.add("any")
        if any(c.replacements for c in self.clusters):
            out.add("replacement")
        if any(c.gpu_increase for c in self.clusters):
            out.add("gpu-increase")
        if any(c.feasible[1] is False for c in self.clusters):
            out.add("infeasible")
        if any(c.status == "removed" for c in self.clusters):
            out.add("cluster-removed")
        return out


def gpu_demand(compiled: CompiledCluster) -> dict[str, int]:
    """Devices the cluster's workloads ask for: full GPUs and MIG slices per profile, counting a shared
    claim once and every pod of a template."""
    demand: dict[str, int] = {}
    seen_groups: set[tuple[str, str]] = set()
    for plan in compiled.plan.workloads:
        w = plan.workload
        if plan.share_group is not None:
            if (plan.namespace, plan.share_group) in seen_groups:
                continue
            seen_groups.add((plan.namespace, plan.share_group))
            claims = 1
        else:
            claims = w.spec.replicas * (w.spec.gpu.multi_node.nodes if w.spec.gpu.multi_node else 1)
        if w.spec.gpu.mig is not None:
            for s in w.spec.gpu.mig.slices:
                label = f"MIG {s.profile}"
                demand[label] = demand.get(label, 0) + s.count * claims
        else:
            demand["GPUs"] = demand.get("GPUs", 0) + (plan.gpus or 0) * claims
    return demand


def _objects(compiled: CompiledCluster | None) -> dict[tuple[str, str, str], KubeObject]:
    return {o.logical_key: o for o in compiled.objects} if compiled else {}


def _compare_objects(old: CompiledCluster | None, new: CompiledCluster | None, out: ClusterDiff) -> None:
    olds, news = _objects(old), _objects(new)
    for key in sorted(set(olds) | set(news)):
        a, b = olds.get(key), news.get(key)
        if a is None:
            out.objects.append(ObjectChange(b.kind, b.namespace, b.name, "added"))
            continue
        if b is None:
            out.objects.append(ObjectChange(a.kind, a.namespace, a.name, "removed"))
            continue
        changes = tuple(diff_values(_comparable(a.manifest), _comparable(b.manifest)))
        if a.name != b.name:
            change = ObjectChange(b.kind, b.namespace, b.name, "replaced", a.name, changes)
            out.objects.append(change)
            effect = b.replacements[0].effect if b.replacements else "renamed: the old object is deleted"
            out.replacements.append(ReplacementNote(change.ref, effect))
        elif changes:
            out.objects.append(ObjectChange(b.kind, b.namespace, b.name, "changed", "", changes))
            for r in b.replacements:
                if touches(list(changes), r.path):
                    out.replacements.append(ReplacementNote(f"{b.kind} {b.namespace + '/' if b.namespace else ''}{b.name}", r.effect))


def _comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """Everything but the name: a renamed object is compared on its content."""
    meta = {k: v for k, v in manifest.get("metadata", {}).items() if k != "name"}
    return {**manifest, "metadata": meta}


def _compare_releases(old: CompiledCluster | None, new: CompiledCluster | None, out: ClusterDiff) -> None:
    def index(c: CompiledCluster | None) -> dict[str, HelmRelease]:
        return {r.name: r for r in c.releases} if c else {}

    olds, news = index(old), index(new)
    for name in sorted(set(olds) | set(news)):
        a, b = olds.get(name), news.get(name)
        if a is None or b is None:
            out.releases.append(ReleaseChange(name, "added" if a is None else "removed"))
            continue
        as_dict = lambda r: {"chart": r.chart.name, "repository": r.chart.repository, "version": r.chart.version,
                             "namespace": r.namespace, "values": r.values}
        changes = tuple(diff_values(as_dict(a), as_dict(b)))
        if changes:
            out.releases.append(ReleaseChange(name, "changed", changes))


def _workload_index(compilation: Compilation | None, cluster: str) -> dict[str, dict]:
    if compilation is None:
        return {}
    return {f"{w.model.metadata.namespace}/{w.model.metadata.name}": w.model.model_dump(by_alias=True, mode="json", exclude_none=True)
            for w in compilation.fleet.workloads_on(cluster)}


def _compare_workloads(old: Compilation | None, new: Compilation | None, name: str, out: ClusterDiff) -> None:
    olds, news = _workload_index(old, name), _workload_index(new, name)
    for key in sorted(set(olds) | set(news)):
        a, b = olds.get(key), news.get(key)
        if a is None or b is None:
            out.workloads.append(WorkloadChange(key, "added" if a is None else "removed"))
        elif changes := diff_values(a, b):
            out.workloads.append(WorkloadChange(key, "changed", tuple(changes)))


def _feasible(compilation: Compilation | None, name: str) -> bool | None:
    if compilation is None:
        return None
    if name in compilation.infeasible:
        return False
    return True if name in compilation.clusters else None


def _plan(compiled: CompiledCluster | None):
    if compiled is None:
        return None
    from ...plan.allocator import plan_cluster_allocation
    from ...plan.inventory import synthesize_for
    from ...plan.inventory.bulk import bulk_objects

    with bulk_objects():
        return plan_cluster_allocation(compiled, synthesize_for(compiled))


def compare(base: Compilation | None, head: Compilation, base_ref: str, placement: bool = True) -> FleetDiff:
    """Both compilations should be lenient, so that an infeasible side is reported rather than fatal.
    With `placement`, both sides are planned on their inventories: feasibility and pool use come from that."""
    def names(c: Compilation | None) -> set[str]:
        return set(c.clusters) | set(c.infeasible) if c else set()

    clusters = []
    for name in sorted(names(base) | names(head)):
        old = base.clusters.get(name) if base else None
        new = head.clusters.get(name)
        feasible = (_feasible(base, name), _feasible(head, name))
        status = "added" if feasible[0] is None else "removed" if feasible[1] is None else "changed"
        diff = ClusterDiff(name, status, feasible=feasible, problems=list(head.infeasible.get(name, [])))
        if placement:
            diff.plans = (_plan(old), _plan(new))
            placed = tuple(f if plan is None else (f and plan.feasible) for f, plan in zip(feasible, diff.plans))
            diff.feasible = placed  # type: ignore[assignment]
            if diff.plans[1] is not None:
                diff.problems += diff.plans[1].diagnostics()
        _compare_workloads(base if feasible[0] is not None else None, head if feasible[1] is not None else None, name, diff)
        if False not in feasible:  # an uncompilable side has no objects to compare
            _compare_objects(old, new, diff)
            _compare_releases(old, new, diff)
        before, after = (gpu_demand(old) if old else {}), (gpu_demand(new) if new else {})
        # a side that does not compile has no known demand; a side that does not exist has none
        default = (None if feasible[0] is False else 0, None if feasible[1] is False else 0)
        diff.gpus = {label: (before.get(label, default[0]), after.get(label, default[1]))
                     for label in sorted(set(before) | set(after))}
        if status == "changed" and not (diff.workloads or diff.objects or diff.releases) and diff.feasible[0] == diff.feasible[1]:
            diff.status = "unchanged"
        clusters.append(diff)
    return FleetDiff(base_ref, clusters)
