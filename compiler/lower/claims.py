"""GPU claims (DESIGN.md sections 4.4 and 4.6).

Exclusive -> a ResourceClaimTemplate per workload (one claim per pod). Shared, TimeSlicing and MPS ->
one named ResourceClaim per share group, carrying the opaque GpuConfig / MigDeviceConfig with the
strategy. MIG mixes -> one request per profile on mig.nvidia.com, tied to one GPU by parentUUID.
Fabric partitions -> a matchAttribute on partition<N>, or a fabricTopologyConfig, by cluster flavour.
Claim specs are immutable, so names carry a hash of the spec: a changed spec is a new object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..facts.driver import builtin_class_for, config_api_version
from ..plan import WorkloadPlan
from ..validate.intents import GpuRequest
from ..validate.resolved import ResolvedCluster
from . import selectors as sel
from .graph import KubeObject, Wave
from .meta import WORKLOAD, hashed_name, make_object



@dataclass(frozen=True)
class ClaimRef:
    kind: str  # ResourceClaimTemplate | ResourceClaim
    name: str
    namespace: str
    requests: tuple[str, ...]


@dataclass(frozen=True)
class Request:
    name: str
    device_class: str
    count: int
    selectors: tuple[str, ...]


def request_name(profile: str) -> str:
    """'1g.10gb+me' -> 'mig-1g-10gb-me': request names must be DNS labels."""
    return "mig-" + profile.replace(".", "-").replace("+", "-")


def requests_for(plan: WorkloadPlan) -> list[Request]:
    gpu = plan.workload.spec.gpu
    common = sel.require_selectors(gpu.require)
    if gpu.mig is not None:
        device_class = gpu.class_ or builtin_class_for("mig")
        return [Request(request_name(s.profile), device_class, s.count, (sel.profile_is(s.profile), *common))
                for s in gpu.mig.slices]
    extra = [sel.min_memory(f"{plan.min_memory_gib}Gi")] if plan.min_memory_gib else []
    return [Request("gpu", gpu.class_ or builtin_class_for("gpu"), plan.gpus or 1, tuple(common + extra))]


def _request_manifest(req: Request, flat: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": req.device_class, "allocationMode": "ExactCount", "count": req.count}
    if req.selectors:
        body["selectors"] = sel.selector_list(list(req.selectors))
    return {"name": req.name, **body} if flat else {"name": req.name, "exactly": body}


def sharing_config(gpu: GpuRequest) -> dict[str, Any] | None:
    if gpu.sharing == "TimeSlicing":
        if gpu.mig is not None:
            return {"strategy": "TimeSlicing"}  # MigDeviceSharing has no timeSlicingConfig
        interval = gpu.time_slicing.interval if gpu.time_slicing else "Default"
        return {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": interval}}
    if gpu.sharing == "MPS":
        mps: dict[str, Any] = {}
        if gpu.mps and gpu.mps.active_thread_percentage is not None:
            mps["defaultActiveThreadPercentage"] = gpu.mps.active_thread_percentage
        if gpu.mps and gpu.mps.pinned_memory_limit is not None:
            mps["defaultPinnedDeviceMemoryLimit"] = gpu.mps.pinned_memory_limit.text
        return {"strategy": "MPS", "mpsConfig": mps} if mps else {"strategy": "MPS"}
    return None


def fabric_topology_config(gpu: GpuRequest) -> dict[str, Any]:
    fabric = gpu.fabric
    assert fabric is not None
    out: dict[str, Any] = {"strategy": fabric.strategy, "virtualizationModel": fabric.virtualization_model}
    if fabric.partition_size is not None:
        out["partitionSize"] = fabric.partition_size
    if fabric.partition_ids:
        out["partitionIds"] = list(fabric.partition_ids)  # the driver's JSON key; the fork README's partitionIDs is wrong
    if fabric.min_bandwidth is not None:
        out["minBandwidth"] = fabric.min_bandwidth
    if fabric.max_latency is not None:
        out["maxLatency"] = fabric.max_latency
    return out


def opaque_config(plan: WorkloadPlan, cluster: ResolvedCluster, request_names: list[str]) -> list[dict[str, Any]]:
    gpu = plan.workload.spec.gpu
    params: dict[str, Any] = {}
    sharing = sharing_config(gpu)
    if sharing is not None:
        params["sharing"] = sharing
    if gpu.fabric is not None and cluster.spec.dra_driver.fabric == "topologyConfig":
        params["fabricTopologyConfig"] = fabric_topology_config(gpu)
    if not params:
        return []
    kind = "MigDeviceConfig" if gpu.mig is not None else "GpuConfig"
    return [{"requests": request_names,
             "opaque": {"driver": sel.DRIVER, "parameters": {"apiVersion": config_api_version(), "kind": kind, **params}}}]


def constraints(plan: WorkloadPlan, cluster: ResolvedCluster, reqs: list[Request]) -> list[dict[str, Any]]:
    gpu = plan.workload.spec.gpu
    names = [r.name for r in reqs]
    if gpu.mig is not None and gpu.mig.same_gpu and sum(r.count for r in reqs) > 1:
        return [{"requests": names, "matchAttribute": f"{sel.DRIVER}/parentUUID"}]
    if gpu.fabric is not None and cluster.spec.dra_driver.fabric == "partitionAttributes" and gpu.fabric.partition_size:
        return [{"requests": names, "matchAttribute": f"{sel.DRIVER}/partition{gpu.fabric.partition_size}"}]
    return []


def claim_spec(plan: WorkloadPlan, cluster: ResolvedCluster) -> tuple[dict[str, Any], list[str]]:
    """The `spec` of a ResourceClaim (also the inner spec of a template) in the cluster's API shape."""
    reqs = requests_for(plan)
    devices: dict[str, Any] = {"requests": [_request_manifest(r, cluster.api.flat_requests) for r in reqs]}
    cons = constraints(plan, cluster, reqs)
    if cons:
        devices["constraints"] = cons
    config = opaque_config(plan, cluster, [r.name for r in reqs])
    if config:
        devices["config"] = config
    return {"devices": devices}, [r.name for r in reqs]


def lower_claims(cluster: ResolvedCluster, plans: list[WorkloadPlan]) -> tuple[list[KubeObject], dict[str, ClaimRef]]:
    """Claim objects for a cluster, and which claim each workload (by `ns/name`) consumes."""
    objects: list[KubeObject] = []
    refs: dict[str, ClaimRef] = {}
    groups: dict[tuple[str, str], list[WorkloadPlan]] = {}
    for plan in plans:
        key = f"{plan.namespace}/{plan.name}"
        if plan.share_group is None:
            spec, names = claim_spec(plan, cluster)
            name = hashed_name(f"{plan.name}-gpu", spec)
            objects.append(make_object(
                cluster.api.api_version, "ResourceClaimTemplate", name, namespace=plan.namespace,
                wave=Wave.CLAIMS, component=f"workload/{key}", origin=plan.intent.source,
                labels={WORKLOAD: plan.name},
                body={"spec": {"metadata": {"labels": {WORKLOAD: plan.name}}, "spec": spec}},
                identity=f"{plan.name}-gpu"))
            refs[key] = ClaimRef("ResourceClaimTemplate", name, plan.namespace, tuple(names))
        else:
            groups.setdefault((plan.namespace, plan.share_group), []).append(plan)
    for (namespace, group), members in sorted(groups.items()):
        # Members agree on every gpu setting (a validation rule); sizing agrees because it sums them.
        lead = max(members, key=lambda p: ((p.gpus or 0), p.min_memory_gib or 0, p.name))
        spec, names = claim_spec(lead, cluster)
        name = hashed_name(group, spec)
        member_names = sorted(p.name for p in members)
        objects.append(make_object(
            cluster.api.api_version, "ResourceClaim", name, namespace=namespace,
            wave=Wave.CLAIMS, component=f"share-group/{namespace}/{group}",
            origin=min(members, key=lambda p: p.name).intent.source,
            labels={"gpuc.dev/share-group": group},
            annotations={"gpuc.dev/share-group-members": ",".join(member_names)},
            body={"spec": spec}, identity=group))
        for p in members:
            refs[f"{p.namespace}/{p.name}"] = ClaimRef("ResourceClaim", name, namespace, tuple(names))
    return objects, refs
