"""GPU claims (DESIGN.md sections 4.4 and 4.6).

Exclusive -> a ResourceClaimTemplate per workload (one claim per pod). Shared, TimeSlicing and MPS ->
one named ResourceClaim per share group, carrying the opaque GpuConfig / MigDeviceConfig with the
strategy. MIG mixes -> one request per profile on mig.nvidia.com, tied to one GPU by parentUUID.
Fabric partitions -> a matchAttribute on partition<N>, or a fabricTopologyConfig, by cluster flavour.
Claim specs are immutable, so names carry a hash of the spec: a changed spec is a new object.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..facts.driver import builtin_class_for, config_api_version, passthrough_config
from ..facts.platform import standard_attribute
from ..plan import AlternativePlan, WorkloadPlan, nic_class
from ..plan.sizing import floor_text
from ..validate.intents import GpuRequest
from ..validate.resolved import ResolvedCluster
from . import selectors as sel
from .graph import KubeObject, Wave
from .meta import WORKLOAD, Sources, hashed_name, make_object, prefixed

NIC_REQUEST = "nic"
PCIE_ROOT = standard_attribute("pcieRoot")

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
    sources: Sources  # relative to the request body (`exactly`, or the request itself on v1beta1)
    origin: tuple[str, ...]  # the intent fields the whole request comes from
    capacity: tuple[tuple[str, str], ...] = ()  # capacity.requests (consumable capacity): name -> amount as written
    alternatives: tuple[Request, ...] = ()  # firstAvailable subrequests, tried in order (the request has no body of its own)
    admin: bool = False  # adminAccess: sees devices other claims hold; count 0 means allocationMode All


def request_name(profile: str) -> str:
    """'1g.10gb+me' -> 'mig-1g-10gb-me': request names must be DNS labels."""
    return "mig-" + profile.replace(".", "-").replace("+", "-")


def requests_for(plan: WorkloadPlan) -> list[Request]:
    gpu = plan.workload.spec.gpu
    common = sel.require_selector_fields(gpu.require)
    require = [f"spec.gpu.require.{field}" for _, field in common]
    class_source = ("spec.gpu.class",) if gpu.class_ else ("spec.gpu.mig",) if gpu.mig else ("spec.gpu",)
    if gpu.mig is not None:
        device_class = gpu.class_ or builtin_class_for("mig")
        out = []
        for i, s in enumerate(gpu.mig.slices):
            at = f"spec.gpu.mig.slices[{i}]"
            sources: Sources = {"deviceClassName": class_source + ("spec.gpu",), "count": (f"{at}.count", at),
                                "selectors": ("spec.gpu.require", f"{at}.profile", "spec.gpu"),
                                "selectors[0]": (f"{at}.profile", at)}
            sources.update({f"selectors[{j + 1}]": (path, "spec.gpu.require") for j, path in enumerate(require)})
            out.append(Request(request_name(s.profile), device_class, s.count, (sel.profile_is(s.profile), *(e for e, _ in common)),
                               sources, (at, "spec.gpu")))
        return out
    if plan.alternatives:
        subs = tuple(_alternative(plan, a, common, require) for a in plan.alternatives if a.viable)
        return [Request("gpu", "", 0, (), {}, ("spec.gpu.alternatives", "spec.gpu"), alternatives=subs)]
    selectors = [e for e, _ in common]
    sources = {"deviceClassName": class_source, "count": _count_source(plan),
               "selectors": ("spec.gpu.require", "spec.model", "spec.gpu")}
    sources.update({f"selectors[{j}]": (path, "spec.gpu.require") for j, path in enumerate(require)})
    if plan.min_memory:
        sources[f"selectors[{len(selectors)}]"] = ("spec.model",)  # the floor sizing adds
        selectors.append(sel.min_memory(floor_text(plan.min_memory)))
    capacity: tuple[tuple[str, str], ...] = ()
    if gpu.fractional and gpu.memory is not None:
        capacity = (("memory", gpu.memory.text),)
        sources["capacity"] = ("spec.gpu.memory", "spec.gpu.sharing")
    if gpu.passthrough:  # whole GPUs for a VM: the vfio twins of the passthrough pools' GPUs
        ids = sorted({i for m in plan.matches if m.ok for i in m.pool.gpu.pci_device_ids})
        sources = {"deviceClassName": ("spec.gpu.passthrough",), "count": ("spec.gpu.count", "spec.gpu"),
                   "selectors": ("spec.gpu.passthrough",)}
        return [Request("gpu", builtin_class_for("vfio"), plan.gpus or 1, (sel.device_id_in(ids),), sources, ("spec.gpu",))]
    if gpu.admin_access:
        sources.update({"adminAccess": ("spec.gpu.adminAccess",), "allocationMode": ("spec.gpu.count", "spec.gpu.adminAccess")})
        count = gpu.count if isinstance(gpu.count, int) else 0  # every matching GPU of the node
        return [Request("gpu", gpu.class_ or builtin_class_for("gpu"), count, tuple(selectors), sources, ("spec.gpu",), admin=True)]
    return [Request("gpu", gpu.class_ or builtin_class_for("gpu"), plan.gpus or 1, tuple(selectors), sources, ("spec.gpu",),
                    capacity)]


def _alternative(plan: WorkloadPlan, alt: AlternativePlan, common: list[tuple[str, str]], common_paths: list[str]) -> Request:
    """A firstAvailable subrequest: the alternative's own class and requirements after the workload's."""
    spec = (plan.workload.spec.gpu.alternatives or [])[alt.index]
    at = f"spec.gpu.alternatives[{alt.index}]"
    own = sel.require_selector_fields(spec.require)
    selectors = [e for e, _ in common] + [e for e, _ in own]
    sources: Sources = {"": (at,), "deviceClassName": (f"{at}.class", at), "count": (f"{at}.count", at, "spec.model"),
                        "selectors": (f"{at}.require", "spec.gpu.require", at)}
    paths = common_paths + [f"{at}.require.{field}" for _, field in own]
    sources.update({f"selectors[{j}]": (path, at) for j, path in enumerate(paths)})
    if alt.min_memory:
        sources[f"selectors[{len(selectors)}]"] = (f"{at}.count", "spec.model")
        selectors.append(sel.min_memory(floor_text(alt.min_memory)))
    return Request(f"alt-{alt.index}", spec.class_ or builtin_class_for("gpu"), alt.gpus or 1, tuple(selectors), sources, (at,))


def _count_source(plan: WorkloadPlan) -> tuple[str, ...]:
    """Where a full-GPU request's count comes from: the intent's count, a fabric partition, or sizing."""
    gpu = plan.workload.spec.gpu
    if isinstance(gpu.count, int):
        return ("spec.gpu.count",)
    if gpu.fabric is not None and gpu.fabric.strategy == "Auto" and gpu.fabric.partition_size:
        return ("spec.gpu.fabric.partitionSize", "spec.gpu.fabric")
    return ("spec.gpu.count", "spec.model", "spec.gpu") if plan.workload.spec.model is not None else ("spec.gpu.count", "spec.gpu")


def _nic_pairs(gpus: Request, nic_class_name: str, gpu: GpuRequest) -> tuple[list[Request], list[Request]]:
    """One GPU request and one NIC request per GPU (`gpu`/`nic` for one GPU, `gpu-<i>`/`nic-<i>` for more), so each
    pair's matchAttribute covers one GPU and its NICs, not every GPU of the pod."""
    n = gpus.count
    names = [("gpu", NIC_REQUEST)] if n == 1 else [(f"gpu-{i}", f"{NIC_REQUEST}-{i}") for i in range(n)]
    nic_sources: Sources = {"deviceClassName": ("spec.gpu.nics",), "count": ("spec.gpu.nics.count", "spec.gpu.nics"),
                            "selectors": ("spec.gpu.nics.cel", "spec.gpu.nics")}
    nic_sources.update({f"selectors[{j}]": (f"spec.gpu.nics.cel[{j}]", "spec.gpu.nics") for j in range(len(gpu.nic_selectors))})
    gpu_reqs = [dataclasses.replace(gpus, name=g, count=1, sources={**gpus.sources, "count": ("spec.gpu.count", "spec.gpu")})
                for g, _ in names]
    nic_reqs = [Request(nic, nic_class_name, gpu.nics_per_gpu or 1, tuple(gpu.nic_selectors), nic_sources, ("spec.gpu.nics",))
                for _, nic in names]
    return gpu_reqs, nic_reqs


def _request_body(req: Request) -> dict[str, Any]:
    body: dict[str, Any] = ({"deviceClassName": req.device_class, "allocationMode": "All"} if req.admin and not req.count
                            else {"deviceClassName": req.device_class, "allocationMode": "ExactCount", "count": req.count})
    if req.selectors:
        body["selectors"] = sel.selector_list(list(req.selectors))
    if req.capacity:
        body["capacity"] = {"requests": dict(req.capacity)}
    if req.admin:
        body["adminAccess"] = True
    return body


def _request_manifest(req: Request, flat: bool) -> dict[str, Any]:
    if req.alternatives:  # firstAvailable: the same shape in every API version that has it
        return {"name": req.name, "firstAvailable": [{"name": a.name, **_request_body(a)} for a in req.alternatives]}
    body = _request_body(req)
    return {"name": req.name, **body} if flat else {"name": req.name, "exactly": body}


def name_basis(spec: dict[str, Any]) -> dict[str, Any]:
    """What a claim's hashed name is computed from: its spec in the request shape of resource.k8s.io/v1beta2 and v1
    (`exactly`), whatever version the cluster serves. The API server stores one object whichever version writes it, so
    a Kubernetes upgrade that moves a cluster from v1beta1 to v1beta2 keeps the claims' names, and their pods run on."""
    devices = spec.get("devices") or {}
    requests = devices.get("requests") or []
    if all("exactly" in r or "firstAvailable" in r for r in requests):
        return spec
    shaped = [r if "exactly" in r or "firstAvailable" in r else {"name": r["name"], "exactly": {k: v for k, v in r.items() if k != "name"}}
              for r in requests]
    return {**spec, "devices": {**devices, "requests": shaped}}


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
    if gpu.passthrough:  # the driver's default leaves /dev/vfio/vfio out, which a KubeVirt VM needs (facts: Passthrough)
        params = passthrough_config()
        kind = params.pop("kind")
    elif not params:
        return []
    else:
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
    spec, names, _ = claim_spec_with_sources(plan, cluster)
    return spec, names


def claim_spec_with_sources(plan: WorkloadPlan, cluster: ResolvedCluster) -> tuple[dict[str, Any], list[str], Sources]:
    """claim_spec, and which intent field produced each part of it (relative to the claim spec)."""
    gpu = plan.workload.spec.gpu
    gpu_reqs = requests_for(plan)
    nic = nic_class(plan)
    pairs: list[list[str]] = []
    if nic is not None:  # NICs of another driver on each GPU's PCIe root (the WG's GPU + RDMA NIC alignment)
        gpu_reqs, nic_reqs = _nic_pairs(gpu_reqs[0], nic, gpu)
        pairs = [[g.name, n.name] for g, n in zip(gpu_reqs, nic_reqs)]
    reqs = gpu_reqs + (nic_reqs if nic is not None else [])
    devices: dict[str, Any] = {"requests": [_request_manifest(r, cluster.api.flat_requests) for r in reqs]}
    sources: Sources = {"devices.requests": ("spec.gpu.mig.slices", "spec.gpu")}
    for i, r in enumerate(reqs):
        sources[f"devices.requests[{i}]"] = r.origin
        for j, a in enumerate(r.alternatives):
            sources.update(prefixed(f"devices.requests[{i}].firstAvailable[{j}]", a.sources))
        body = f"devices.requests[{i}]" + ("" if cluster.api.flat_requests else ".exactly")
        sources.update(prefixed(body, r.sources))
    cons = constraints(plan, cluster, gpu_reqs)
    cons.extend({"requests": pair, "matchAttribute": PCIE_ROOT} for pair in pairs)
    if cons:
        devices["constraints"] = cons
        sources["devices.constraints"] = (("spec.gpu.mig.sameGpu", "spec.gpu.mig") if gpu.mig is not None
                                          else ("spec.gpu.nics",) if nic is not None
                                          else ("spec.gpu.fabric.partitionSize", "spec.gpu.fabric"))
    config = opaque_config(plan, cluster, [r.name for r in gpu_reqs])  # the GPU driver's config is for its own requests
    if config:
        devices["config"] = config
        sources["devices.config"] = ("spec.gpu.passthrough",) if gpu.passthrough else ("spec.gpu.sharing", "spec.gpu")
        sources.update(prefixed("devices.config[0].opaque.parameters", _config_sources(gpu)))
    return {"devices": devices}, [r.name for r in reqs], sources


def _config_sources(gpu: GpuRequest) -> Sources:
    sources: Sources = {
        "sharing": ("spec.gpu.sharing", "spec.gpu"),
        "sharing.timeSlicingConfig": ("spec.gpu.timeSlicing", "spec.gpu.sharing"),
        "sharing.mpsConfig": ("spec.gpu.mps", "spec.gpu.sharing"),
        "sharing.mpsConfig.defaultActiveThreadPercentage": ("spec.gpu.mps.activeThreadPercentage", "spec.gpu.mps"),
        "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit": ("spec.gpu.mps.pinnedMemoryLimit", "spec.gpu.mps"),
        "fabricTopologyConfig": ("spec.gpu.fabric",),
        "iommu": ("spec.gpu.passthrough",),
    }
    for key in fabric_topology_config(gpu) if gpu.fabric is not None else {}:
        field = "partitionIDs" if key == "partitionIds" else key
        sources[f"fabricTopologyConfig.{key}"] = (f"spec.gpu.fabric.{field}", "spec.gpu.fabric")
    return sources


def lower_claims(cluster: ResolvedCluster, plans: list[WorkloadPlan]) -> tuple[list[KubeObject], dict[str, ClaimRef]]:
    """Claim objects for a cluster, and which claim each workload (by `ns/name`) consumes."""
    objects: list[KubeObject] = []
    refs: dict[str, ClaimRef] = {}
    groups: dict[tuple[str, str], list[WorkloadPlan]] = {}
    for plan in plans:
        key = f"{plan.namespace}/{plan.name}"
        if plan.share_group is None:
            spec, names, sources = claim_spec_with_sources(plan, cluster)
            name = hashed_name(f"{plan.name}-gpu", name_basis(spec))
            objects.append(make_object(
                cluster.api.api_version, "ResourceClaimTemplate", name, namespace=plan.namespace,
                wave=Wave.CLAIMS, component=f"workload/{key}", origin=plan.intent.source,
                labels={WORKLOAD: plan.name},
                body={"spec": {"metadata": {"labels": {WORKLOAD: plan.name}}, "spec": spec}},
                identity=f"{plan.name}-gpu", sources={"": ("spec.gpu",), **prefixed("spec.spec", sources)}))
            refs[key] = ClaimRef("ResourceClaimTemplate", name, plan.namespace, tuple(names))
        else:
            groups.setdefault((plan.namespace, plan.share_group), []).append(plan)
    for (namespace, group), members in sorted(groups.items()):
        # Members agree on every gpu setting (a validation rule); sizing agrees because it sums them.
        lead = max(members, key=lambda p: ((p.gpus or 0), p.min_memory or 0, p.name))
        spec, names, sources = claim_spec_with_sources(lead, cluster)
        name = hashed_name(group, name_basis(spec))
        member_names = sorted(p.name for p in members)
        objects.append(make_object(
            cluster.api.api_version, "ResourceClaim", name, namespace=namespace,
            wave=Wave.CLAIMS, component=f"share-group/{namespace}/{group}",
            origin=min(members, key=lambda p: p.name).intent.source,
            labels={"gpuc.dev/share-group": group},
            annotations={"gpuc.dev/share-group-members": ",".join(member_names)},
            body={"spec": spec}, identity=group, sources={"": ("spec.gpu.shareGroup", "spec.gpu"), **prefixed("spec", sources)}))
        for p in members:
            refs[f"{p.namespace}/{p.name}"] = ClaimRef("ResourceClaim", name, namespace, tuple(names))
    return objects, refs
