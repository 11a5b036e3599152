"""The pods a compiled cluster will run, and the claims each one references.

Every workload replica is a pod (multi-node workloads: `nodes` pods per replica). A pod
instantiates its workload's ResourceClaimTemplate (one claim per pod) or references its share
group's ResourceClaim (one claim for every consumer), and a multi-node pod also gets a claim from
the ComputeDomain's channel template. DeviceClasses are the compiled ones plus those the driver
chart creates.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...facts.driver import builtin_classes, compute_domain_channel_request
from ...load.yaml_source import SourceDoc
from ...lower.graph import CompiledCluster
from ..inventory import driver_setup
from .requests import EXACT_COUNT, ClaimError, ClaimSpec, DeviceClass, Option, Request, parse_claim_spec, parse_device_class


class PodClaim(NamedTuple):  # NamedTuples here: built per pod, and a frozen dataclass's __init__ costs 5x
    key: str  # the claim object's identity: shared "ns/name", or one per pod for template instances
    label: str  # "gpu" | "channel": what the pod calls it
    source: str  # the object it comes from, for messages: "ResourceClaimTemplate ns/name"
    spec: ClaimSpec | None  # None when the source object cannot be parsed (see `error`)
    shared: bool  # a ResourceClaim several pods reference: allocated once, pinned to its node
    error: str = ""


class Pod(NamedTuple):
    workload: str  # ns/name
    name: str
    replica: int
    rank: int  # which node of a multi-node replica
    claims: tuple[PodClaim, ...]
    origin: SourceDoc  # the workload intent

    @property
    def devices(self) -> int:
        return sum(c.spec.min_devices for c in self.claims if c.spec is not None)

    @property
    def constrained(self) -> bool:
        return any(c.spec is not None and c.spec.constraints for c in self.claims)


def _parse(source: str, spec: Any) -> tuple[ClaimSpec | None, str]:
    try:
        return parse_claim_spec(spec), ""
    except ClaimError as exc:
        return None, f"{source}: {exc}"


def device_classes(compiled: CompiledCluster, chart_values: dict[str, Any]) -> dict[str, DeviceClass]:
    """Compiled DeviceClasses plus the chart's built-in ones (those its enabled resources create)."""
    setup = driver_setup(compiled.cluster.driver, chart_values)
    enabled = {"gpus": setup.gpus, "computeDomains": setup.compute_domains}
    classes = {c.name: DeviceClass(c.name, (c.selector,)) for c in builtin_classes(compiled.cluster.driver).values()
               if enabled[c.resources]}
    for obj in compiled.objects:
        if obj.kind == "DeviceClass":
            try:
                cls = parse_device_class(obj.manifest)
            except ClaimError:
                continue  # a class the API server would refuse does not exist for the allocator either
            classes[cls.name] = cls
    for pool in compiled.cluster.dra_pools:  # another driver's NIC class: taken to select that driver's devices
        if pool.spec.nics is not None:
            classes.setdefault(pool.spec.nics.device_class, DeviceClass(pool.spec.nics.device_class,
                                                                        (f'device.driver == "{pool.spec.nics.driver}"',)))
    return classes


def channel_claim_spec() -> ClaimSpec:
    request, device_class = compute_domain_channel_request()
    return ClaimSpec((Request(request, (Option(request, device_class, (), EXACT_COUNT, 1),)),))


def cluster_pods(compiled: CompiledCluster) -> list[Pod]:
    """Every pod of every workload on the cluster, in workload order then replica and node rank."""
    objects = {(o.kind, o.namespace, o.name): o for o in compiled.objects}
    channel = channel_claim_spec()
    pods: list[Pod] = []
    for plan in compiled.plan.workloads:
        key = f"{plan.namespace}/{plan.name}"
        ref = compiled.claims.get(key)
        if ref is None:
            continue
        obj = objects[(ref.kind, ref.namespace, ref.name)]
        source = f"{ref.kind} {ref.namespace}/{ref.name}"
        shared = ref.kind == "ResourceClaim"
        body = obj.manifest.get("spec")
        spec, error = _parse(source, body if shared or not isinstance(body, dict) else body.get("spec"))
        channel_template = compiled.channels.get(key)
        workload = plan.workload
        nodes = workload.spec.gpu.multi_node.nodes if workload.spec.gpu.multi_node else 1
        base, origin = workload.metadata.name, plan.intent.source
        for replica in range(workload.spec.replicas):
            for rank in range(nodes):
                name = f"{base}-{replica}" + (f"-{rank}" if nodes > 1 else "")
                claims = [PodClaim(f"{ref.namespace}/{ref.name}" if shared else f"{plan.namespace}/{name}-gpu", "gpu",
                                   source, spec, shared, error)]
                if channel_template:
                    claims.append(PodClaim(f"{plan.namespace}/{name}-channel", "channel",
                                           f"ComputeDomain channel template {plan.namespace}/{channel_template}",
                                           channel, False))
                pods.append(Pod(key, name, replica, rank, tuple(claims), origin))
    return pods
