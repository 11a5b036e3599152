"""Compare two compiled fleets: what a reviewer must know about an intent change.

Objects are compared as compiled objects, not text. An object whose content-hashed name changed
(claims, templates, ComputeDomains) is paired with its predecessor by identity and reported as a
replacement; a change to a field the API server refuses to update in place (NIMService
spec.draResources) is reported as a replacement too, and so is a node pool's MIG reconfiguration
(its `nvidia.com/mig.config` label), which stops the GPU pods on those nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...check.gate import ClusterOutcome, CompiledFleet
from ...diagnostics import Diagnostic
from ...facts.driver import kubelet_plugin_daemonset
from ...facts.platform import gpu_operator
from ...load.yaml_source import SourceDoc
from ...lower.claims import name_basis
from ...lower.graph import CompiledCluster, HelmRelease, KubeObject
from ...place import AllocationPlan
from ..upgrade.hazards import hazards
from ..upgrade.shape import busy_pools, shape_of
from .cost import ClusterCost, cluster_cost
from .fields import FieldChange, diff_values, touches
from .leftovers import orphaned, pruned


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


Pair = tuple[int | None, int | None]  # before, after; None: unknown (that side does not compile)


@dataclass
class ClusterDiff:
    name: str
    status: str  # added | removed | changed | unchanged
    intent: tuple[FieldChange, ...] = ()  # changed fields of the Cluster intent itself
    workloads: list[WorkloadChange] = field(default_factory=list)
    objects: list[ObjectChange] = field(default_factory=list)
    releases: list[ReleaseChange] = field(default_factory=list)
    replacements: list[ReplacementNote] = field(default_factory=list)
    gpus: dict[str, Pair] = field(default_factory=dict)  # device label -> requested before, after
    capacity: dict[str, Pair] = field(default_factory=dict)  # node pool -> GPUs it offers before, after
    occupied: Pair = (None, None)  # physical GPUs the placed pods hold, from the allocator
    feasible: tuple[bool | None, bool | None] = (None, None)  # None: the cluster does not exist on that side
    problems: list[Diagnostic] = field(default_factory=list)  # why the new side cannot be compiled
    rejected: list[Diagnostic] = field(default_factory=list)  # the new side's output the checks refuse (render would too)
    plans: tuple[AllocationPlan | None, AllocationPlan | None] = (None, None)  # before and after, when that side was placed
    cost: ClusterCost | None = None  # GPUs per pool before and after, fit, headroom, budgets, nodes to add
    source: SourceDoc | None = None  # the head's Cluster intent, where findings about the cluster point
    staged: list[str] = field(default_factory=list)  # why one commit cannot take the change (gpuc upgrade plans its steps)
    prunes: list[str] = field(default_factory=list)  # what the sync deletes
    orphans: list[str] = field(default_factory=list)  # what nothing deletes, and how to

    @property
    def changed(self) -> bool:
        return self.status != "unchanged"

    @property
    def gpu_increase(self) -> bool:
        """The placed pods hold more physical GPUs after the change (a GPU holding any MIG device counts whole),
        so a swap to a larger MIG profile on fewer GPUs is no increase. An unknown before counts as none;
        pods that cannot be placed hold nothing (`infeasible` gates those)."""
        before, after = self.occupied
        return after is not None and after > (before or 0)

    @property
    def over_budget(self) -> bool:
        """The head takes a namespace over a limit of its team budget."""
        return self.cost is not None and any(b.over for b in self.cost.budgets)

    def all_problems(self) -> list[Diagnostic]:
        """Compile findings, refused output, then one per pod the allocator cannot place."""
        return self.problems + self.rejected + (self.plans[1].diagnostics() if self.plans[1] is not None else [])


@dataclass
class FleetDiff:
    base: str
    clusters: list[ClusterDiff]
    base_problems: list[Diagnostic] = field(default_factory=list)  # why the base does not compile
    commit: str = ""  # the commit `base` named when the diff ran (abbreviated)

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
        if any(c.feasible[1] is False or c.rejected for c in self.clusters):
            out.add("infeasible")
        if any(c.over_budget for c in self.clusters):
            out.add("budget")
        if any(c.status == "removed" for c in self.clusters):
            out.add("cluster-removed")
        if any(c.staged for c in self.clusters):
            out.add("staged")
        return out

    def why(self, condition: str) -> str:
        """What makes `condition` hold, in a few words naming the clusters (for a tripped --fail-on)."""
        def named(clusters: list[ClusterDiff]) -> str:
            names = [c.name for c in clusters]
            return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

        if condition == "any":
            return f"{named([c for c in self.clusters if c.changed])} changed"
        if condition == "replacement":
            hit = [c for c in self.clusters if c.replacements]
            return f"{sum(len(c.replacements) for c in hit)} object(s) replaced, not updated in place ({named(hit)})"
        if condition == "gpu-increase":
            return f"more GPUs held on {named([c for c in self.clusters if c.gpu_increase])}"
        if condition == "infeasible":
            return f"{named([c for c in self.clusters if c.feasible[1] is False or c.rejected])} would not render"
        if condition == "budget":
            hit = [c for c in self.clusters if c.over_budget]
            teams = sorted({f"{b.namespace} on {c.name}" for c in hit for b in c.cost.budgets if b.over})  # type: ignore[union-attr]
            return f"a team over its budget: {', '.join(teams[:5])}" + (f" and {len(teams) - 5} more" if len(teams) > 5 else "")
        if condition == "cluster-removed":
            return f"{named([c for c in self.clusters if c.status == 'removed'])} removed"
        if condition == "staged":
            return f"{named([c for c in self.clusters if c.staged])} cannot take the change as one commit (gpuc upgrade plans the steps)"
        return condition


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
            assert b is not None
            out.objects.append(ObjectChange(b.kind, b.namespace, b.name, "added"))
            continue
        if b is None:
            out.objects.append(ObjectChange(a.kind, a.namespace, a.name, "removed"))
            continue
        changes = tuple(diff_values(_comparable(a.manifest), _comparable(b.manifest)))
        if a.name != b.name and new is not None:
            effects = [_rename_effect(a, b, new)]
        else:
            effects = [r.effect for r in b.replacements if touches(list(changes), r.path)]
        if not (changes or effects):
            continue
        change = ObjectChange(b.kind, b.namespace, b.name, "replaced" if effects else "changed",
                              a.name if a.name != b.name else "", changes)
        out.objects.append(change)
        out.replacements += [ReplacementNote(change.ref, effect) for effect in effects]


def _rename_effect(old: KubeObject, new: KubeObject, compiled: CompiledCluster) -> str:
    """A renamed object replaces its predecessor. Pods gpuc does not render (claims-only workloads) name the
    claim themselves, so they must be edited, not just restarted."""
    users = _claims_only_users(new, compiled)
    if users:
        return (f"claim specs are immutable and the name follows the spec hash: pods of {', '.join(users)} that "
                f"reference `{old.name}` must be updated to `{new.name}` (gpuc does not render them), "
                f"or they cannot start once the old {old.kind} is deleted")
    return new.replacements[0].effect if new.replacements else "renamed: the old object is deleted"


def _claims_only_users(obj: KubeObject, compiled: CompiledCluster) -> list[str]:
    """Workloads without a model (so without pods gpuc renders) whose claim is `obj`."""
    claims_only = {f"{p.namespace}/{p.name}" for p in compiled.plan.workloads if p.workload.spec.model is None}
    return sorted(key for key, ref in compiled.claims.items()
                  if key in claims_only and (ref.kind, ref.namespace, ref.name) == (obj.kind, obj.namespace, obj.name))


def _compare_mig_config(old: CompiledCluster | None, new: CompiledCluster | None, out: ClusterDiff) -> None:
    """A node pool whose mig.config label changes is repartitioned by the GPU Operator's MIG manager, which
    evicts the GPU pods on those nodes first: a disruption no object diff shows."""
    if old is None or new is None:
        return
    label = gpu_operator()["migConfigLabel"]
    for pool in sorted(set(old.node_labels) & set(new.node_labels)):
        # a pool without the label is not partitioned: the same as all-disabled
        a = old.node_labels[pool].get(label, "all-disabled")
        b = new.node_labels[pool].get(label, "all-disabled")
        if a != b:
            out.replacements.append(ReplacementNote(
                f"node pool {pool}: {label} {a} -> {b}",
                "MIG reconfiguration: the MIG manager stops every GPU pod on the pool's nodes and repartitions their GPUs"
                + _plugin_restart(new, pool)))


def _plugin_restart(compiled: CompiledCluster, pool: str) -> str:
    """What a DRA pool's MIG change needs after the MIG Manager: the running kubelet plugin publishes the MIG
    devices it found at start-up, so it is restarted to publish the new ones."""
    if pool not in {p.name for p in compiled.cluster.dra_pools}:
        return ""
    spec = compiled.cluster.spec
    if spec.gpu_operator.mode == "gpuCluster":
        restart = f"restart the GPU Operator's DRA kubelet plugin pods on those nodes (namespace {spec.gpu_operator.namespace})"
    else:
        name = kubelet_plugin_daemonset(compiled.cluster.driver.chart_name, compiled.driver_values)
        restart = f"`kubectl -n {spec.dra_driver.namespace} rollout restart daemonset/{name}`"
    state = gpu_operator()["migConfigStateLabel"]
    return (f"; the running DRA kubelet plugin does not see the new MIG devices until it restarts: once {state}=success "
            f"on the pool's nodes, {restart}")


def _compare_operator_mode(old: CompiledCluster | None, new: CompiledCluster | None, out: ClusterDiff) -> None:
    """Who installs the DRA driver changes with gpuOperator.mode gpuCluster: the driver's own release is removed
    and the GPU Operator's GPUCluster installs it (or back), and the ClusterPolicy's operands come or go.
    No object diff says that this is a reinstall of the whole GPU stack."""
    if old is None or new is None:
        return
    a, b = old.cluster.spec.gpu_operator.mode, new.cluster.spec.gpu_operator.mode
    if a != b and "gpuCluster" in (a, b):
        out.replacements.append(ReplacementNote(
            f"gpuOperator.mode {a} -> {b}",
            "the DRA driver changes owner (its own Helm release <-> the GPU Operator's GPUCluster) and is uninstalled and "
            "reinstalled: ResourceSlices are withdrawn and republished, no new claim is allocated meanwhile, and the "
            "ClusterPolicy with its device plugin, container toolkit and MIG Manager "
            + ("is removed" if b == "gpuCluster" else "comes back")
            + "; GPU Operator 26.7 supports gpuCluster mode on new clusters only"))


def _comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """Everything but the name: a renamed object is compared on its content. A claim's spec is compared in one request
    shape whatever resource.k8s.io version writes it: the API server stores one object, so a claim written as v1beta1
    before an upgrade and as v1beta2 after is the same claim, updated (its apiVersion), not replaced."""
    meta = {k: v for k, v in manifest.get("metadata", {}).items() if k != "name"}
    out = {**manifest, "metadata": meta}
    if manifest.get("kind") == "ResourceClaim" and isinstance(manifest.get("spec"), dict):
        out["spec"] = name_basis(manifest["spec"])
    elif manifest.get("kind") == "ResourceClaimTemplate" and isinstance((manifest.get("spec") or {}).get("spec"), dict):
        out["spec"] = {**manifest["spec"], "spec": name_basis(manifest["spec"]["spec"])}
    return out


def _compare_releases(old: CompiledCluster | None, new: CompiledCluster | None, out: ClusterDiff) -> None:
    def index(c: CompiledCluster | None) -> dict[str, HelmRelease]:
        return {r.name: r for r in c.releases} if c else {}

    olds, news = index(old), index(new)
    for name in sorted(set(olds) | set(news)):
        a, b = olds.get(name), news.get(name)
        if a is None or b is None:
            out.releases.append(ReleaseChange(name, "added" if a is None else "removed"))
            continue
        changes = tuple(diff_values(_release_fields(a), _release_fields(b)))
        if changes:
            out.releases.append(ReleaseChange(name, "changed", changes))


def _release_fields(r: HelmRelease) -> dict[str, Any]:
    return {"chart": r.chart.name, "repository": r.chart.location, "version": r.chart.version,
            "namespace": r.namespace, "values": r.values}


def _cluster_intent(compilation: CompiledFleet | None, name: str) -> dict | None:
    intent = compilation.fleet.clusters.get(name) if compilation else None
    return intent.model.model_dump(by_alias=True, mode="json", exclude_none=True) if intent else None


def _capacity(compilation: CompiledFleet | None, name: str) -> dict[str, int]:
    """GPUs each node pool offers: nodes x GPUs per node, from the Cluster intent."""
    intent = compilation.fleet.clusters.get(name) if compilation else None
    return {p.name: p.nodes * p.gpu.count for p in intent.model.spec.node_pools} if intent else {}


def _occupied(plan) -> int | None:
    return sum(u.gpus_used for u in plan.pools) if plan is not None else None


def _pairs(before: dict[str, int], after: dict[str, int], default: Pair) -> dict[str, Pair]:
    """Values by key on both sides; a key one side lacks takes that side's default."""
    return {k: (before.get(k, default[0]), after.get(k, default[1])) for k in sorted(set(before) | set(after))}


def _workload_index(compilation: CompiledFleet | None, cluster: str) -> dict[str, dict]:
    if compilation is None:
        return {}
    return {f"{w.model.metadata.namespace}/{w.model.metadata.name}": w.model.model_dump(by_alias=True, mode="json", exclude_none=True)
            for w in compilation.fleet.workloads_on(cluster)}


def _compare_workloads(old: CompiledFleet | None, new: CompiledFleet | None, name: str, out: ClusterDiff) -> None:
    olds, news = _workload_index(old, name), _workload_index(new, name)
    for key in sorted(set(olds) | set(news)):
        a, b = olds.get(key), news.get(key)
        if a is None or b is None:
            out.workloads.append(WorkloadChange(key, "added" if a is None else "removed"))
        elif changes := diff_values(a, b):
            out.workloads.append(WorkloadChange(key, "changed", tuple(changes)))


def _feasible(outcome: ClusterOutcome | None) -> bool | None:
    """None: no such cluster on that side; False: it does not compile or some pod cannot be placed."""
    if outcome is None:
        return None
    return outcome.compiled is not None and not outcome.unplaced


def compare(base: CompiledFleet | None, head: CompiledFleet, base_ref: str, base_problems: list[Diagnostic] | None = None) -> FleetDiff:
    """Both sides compiled with placement detail, whatever their gate says: an infeasible side is reported,
    not fatal; feasibility and pool use come from the placements. With `base_problems` the base did not
    compile: every cluster of the head is compared against an unknown before."""
    def names(c: CompiledFleet | None) -> set[str]:
        return set(c.clusters) if c else set()

    broken = bool(base_problems)
    clusters = []
    for name in sorted(names(base) | names(head)):
        was = base.clusters.get(name) if base else None
        now = head.clusters.get(name)
        old = was.compiled if was else None
        new = now.compiled if now else None
        # None: no such cluster on that side; False: it does not compile
        compiles = (False if broken else None if was is None else old is not None, None if now is None else new is not None)
        feasible = (False if broken else _feasible(was), _feasible(now))
        status = "added" if compiles[0] is None else "removed" if compiles[1] is None else "changed"
        problems = list(now.infeasible) if now is not None and new is None else []  # placement's findings come from the plan
        diff = ClusterDiff(name, status, feasible=feasible, problems=problems, rejected=list(now.rejected) if now else [])
        diff.plans = (was.placement if was else None, now.placement if now else None)
        diff.cost = cluster_cost(diff.plans, old, new)
        intent = head.fleet.clusters.get(name)
        diff.source = intent.source if intent is not None else None
        if not broken:
            _compare_workloads(base if compiles[0] is not None else None, head if compiles[1] is not None else None, name, diff)
            before, after = _cluster_intent(base, name), _cluster_intent(head, name)
            diff.intent = tuple(diff_values(before, after)) if before and after else ()
        if False not in compiles:  # an uncompilable side has no objects to compare
            _compare_objects(old, new, diff)
            _compare_releases(old, new, diff)
            _compare_mig_config(old, new, diff)
            _compare_operator_mode(old, new, diff)
            if old is not None and new is not None:
                was_shape = shape_of(old)
                diff.staged = [h.message for h in hazards(was_shape, shape_of(new), busy_pools(was_shape, diff.plans[0]))]
                diff.prunes, diff.orphans = pruned(old, new), orphaned(old, new)
        # a side that does not compile has no known demand; a side that does not exist has none
        default = (None if compiles[0] is False else 0, None if compiles[1] is False else 0)
        diff.gpus = _pairs(gpu_demand(old) if old else {}, gpu_demand(new) if new else {}, default)
        diff.capacity = _pairs({} if broken else _capacity(base, name), _capacity(head, name), (None if broken else 0, 0))
        diff.occupied = tuple(_occupied(p) if p is not None else d for p, d in zip(diff.plans, default))  # type: ignore[assignment]
        if status == "changed" and not (diff.intent or diff.workloads or diff.objects or diff.releases or diff.replacements) \
                and diff.feasible[0] == diff.feasible[1] and not broken:
            diff.status = "unchanged"
        clusters.append(diff)
    return FleetDiff(base_ref, clusters, list(base_problems or []))
