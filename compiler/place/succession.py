"""What runs after each step of a staged change: the step's pods placed on the devices the step publishes, next to the
claims the step before left allocated.

A claim keeps its devices through a step when the step still publishes them and still renders the claim (the same
template spec, or the same shared claim): its pod is kept. A claim whose devices the step no longer publishes because
nobody serves its pool during the step (the driver release retired, the pool held back) is carried: the pod runs on,
holding its GPUs, and nothing new is allocated there until a later step serves the pool again. A claim whose devices
are gone from a pool that is still served (a new MIG layout), or that the step renders differently, is not kept: its
pod restarts and is placed anew, like any pod that is new in the step. The claims are what `--state` would read of
the cluster after the step (ResourceClaims with status.allocation), so each step is planned exactly as `gpuc plan
--state` plans a running cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..load.state import ClusterState, StateObject
from ..lower.graph import CompiledCluster
from ..lower.meta import MANAGED_BY, WORKLOAD
from .allocator import AllocationPlan, cluster_pods, device_classes, plan_pods
from .held import GROUP, NO_USE, POD_CLAIM_ANNOTATION, Ownership, cluster_use
from .inventory import synthesize
from .inventory.synth import node_names

POD_LABEL = "gpuc.dev/pod"  # which pod holds a claim gpuc synthesized for a step (a real cluster says it by ownerReferences)


@dataclass(frozen=True)
class StepPlacement:
    plan: AllocationPlan
    state: ClusterState  # the claims allocated after the step
    carried: tuple[tuple[str, str], ...]  # (ns/pod, ns/workload) that run on through the step on devices it does not publish


def _claim(namespace: str, name: str, spec: dict[str, Any], results: list[dict[str, Any]], pod: str, workload: str,
           shared: bool) -> StateObject:
    labels = {MANAGED_BY: "gpuc"} if shared else {WORKLOAD: workload.split("/")[1], POD_LABEL: pod}
    annotations = {} if shared else {POD_CLAIM_ANNOTATION: "gpu"}
    raw = {"apiVersion": f"{GROUP}/v1", "kind": "ResourceClaim",
           "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations,
                        "ownerReferences": [] if shared else [{"apiVersion": "v1", "kind": "Pod", "name": pod}]},
           "spec": spec, "status": {"allocation": {"devices": {"results": results}}}}
    return StateObject(raw, None, (0, ()))


def allocated(compiled: CompiledCluster, plan: AllocationPlan) -> list[StateObject]:
    """The GPU claims of `plan`'s placed pods, allocated as placed (ComputeDomain channels are not GPUs: left out)."""
    specs = {(o.namespace, o.name): (o.manifest["spec"].get("spec", {}) if o.kind == "ResourceClaimTemplate" else o.manifest["spec"])
             for o in compiled.objects if o.kind in ("ResourceClaimTemplate", "ResourceClaim")}
    out: dict[tuple[str, str], StateObject] = {}
    for pod in plan.pods:
        if pod.node is None:
            continue
        for claim in pod.claims:
            if claim.label != "gpu" or not claim.devices:
                continue
            namespace, name = claim.claim.split("/", 1)
            source = claim.source.rpartition(" ")[2].split("/", 1)[-1]
            spec = specs.get((namespace, source if not claim.shared else name), {})
            results = [d.as_dict() for d in claim.devices]
            out.setdefault((namespace, name), _claim(namespace, name, spec, results, pod.pod, pod.workload, claim.shared))
    return list(out.values())


def _results(claim: StateObject) -> list[dict[str, Any]]:
    results = ((claim.status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return [r for r in results if isinstance(r, dict)]


def holder(claim: StateObject) -> str:
    """The pod that holds a claim: its owner (a template's claim), or the label a synthesized one carries."""
    owners = [r.get("name", "") for r in claim.metadata.get("ownerReferences") or [] if r.get("kind") == "Pod"]
    return owners[0] if owners else str((claim.metadata.get("labels") or {}).get(POD_LABEL, ""))


def place_step(compiled: CompiledCluster, before: ClusterState | None, remade: frozenset[str] = frozenset()) -> StepPlacement:
    """Place the step `compiled` on what it publishes, after the claims of `before` (None: nothing runs yet). `remade`
    names pools whose devices the step destroys and creates anew (a new MIG layout): what was allocated there is gone,
    even where a new device has the old one's name."""
    cluster = compiled.cluster
    inventory = synthesize(cluster, compiled.driver_values, compiled.node_labels)
    served = {n for p in cluster.pools if p.dra and cluster.driver_runs for n in node_names(p)}
    gone = {n for p in cluster.pools if p.name in remade for n in node_names(p)}
    claims = [c for c in (before.of(GROUP, "ResourceClaim") if before is not None else [])
              if not any(str(r.get("pool")) in gone for r in _results(c))]
    use = cluster_use(compiled, ClusterState(claims, ("(previous step)",)), inventory) if claims else None
    ownership = Ownership(compiled)
    known = {(inventory.slices[d.slice_index].pool, d.name) for d in inventory.devices}
    carried: list[StateObject] = []
    for claim in claims:
        results = _results(claim)
        if not results or not ownership.owns(claim) or ownership.running(claim) is None:
            continue
        pools = {str(r.get("pool")) for r in results}
        if all((str(r.get("pool")), str(r.get("device"))) in known for r in results):
            continue  # published: cluster_use keeps it
        if not pools & served:  # nobody serves its node during the step: the pod runs on, holding its devices
            carried.append(claim)
    pods = cluster_pods(compiled)
    skip_shared = {f"{c.namespace}/{c.name}" for c in carried if WORKLOAD not in (c.metadata.get("labels") or {})}
    per_workload: dict[str, int] = {}
    for c in carried:
        if f"{c.namespace}/{c.name}" not in skip_shared:
            key = f"{c.namespace}/{(c.metadata.get('labels') or {})[WORKLOAD]}"
            per_workload[key] = per_workload.get(key, 0) + 1
    kept_running: list[tuple[str, str]] = []
    placing = []
    for pod in pods:
        if any(c.key in skip_shared for c in pod.claims):
            kept_running.append((f"{pod.workload.split('/')[0]}/{pod.name}", pod.workload))
            continue
        if per_workload.get(pod.workload, 0) and any(not c.shared and c.label == "gpu" for c in pod.claims):
            per_workload[pod.workload] -= 1
            kept_running.append((f"{pod.workload.split('/')[0]}/{pod.name}", pod.workload))
            continue
        placing.append(pod)
    plan = plan_pods(cluster, inventory, device_classes(compiled, compiled.driver_values), placing, None, True,
                     use if use is not None else NO_USE)
    after = ClusterState([*allocated(compiled, plan), *carried], ("(after the step)",))
    return StepPlacement(plan, after, tuple(kept_running))
