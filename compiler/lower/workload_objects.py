"""Objects a workload brings besides its claims: DeviceClasses (4.3), ComputeDomains (4.5),
NIMCache and NIMService (4.7), and the Namespaces they live in."""

from __future__ import annotations

import math
from typing import Any

from ..facts.driver import config_api_version
from ..facts.platform import admin_access_label, gpu_operator, nim_name_limit, nim_operator
from ..load.yaml_source import SourceDoc
from ..plan import WorkloadPlan
from ..validate.documents import Intent
from ..validate.intents import GpuDeviceClass
from ..validate.resolved import ResolvedCluster
from . import selectors as sel
from .claims import ClaimRef
from .graph import KubeObject, Wave
from .meta import KEEP_NAMESPACE, MISSING_CRD_OK, SYNC_OPTIONS, WORKLOAD, Sources, hashed_name, make_object, replacements_of
from .tolerations import tolerations

IMMUTABLE_FIELDS = "gpuc.dev/immutable-fields"


def lower_device_class(cluster: ResolvedCluster, cls: Intent[GpuDeviceClass]) -> KubeObject:
    spec = cls.model.spec
    expressions = [sel.driver_and_type("mig" if spec.mig else "gpu")]
    if spec.mig:
        expressions.append(sel.profile_in(sorted({s.profile for s in spec.mig.slices})))
    expressions.extend(sel.require_selectors(spec.require))
    return make_object(cluster.api.api_version, "DeviceClass", cls.model.metadata.name, wave=Wave.DEVICE_CLASSES,
                       component="device-classes", origin=cls.source, body={"spec": {"selectors": sel.selector_list(expressions)}},
                       sources={"": ("spec", "metadata.name"), "spec.selectors": ("spec.require", "spec.mig")})


def compute_domain(cluster: ResolvedCluster, plan: WorkloadPlan) -> tuple[KubeObject, str]:
    """A ComputeDomain for a multi-node workload, and the channel template name pods consume."""
    multi_node = plan.workload.spec.gpu.multi_node
    assert multi_node is not None
    nodes = multi_node.nodes * max(plan.workload.spec.replicas, 1)
    core: dict[str, Any] = {"numNodes": nodes} if cluster.driver.numnodes_required else {}
    name = hashed_name(plan.name, {"kind": "ComputeDomain", **core})
    channel = f"{name}-channel"
    spec = {**core, "channel": {"resourceClaimTemplate": {"name": channel}}}
    obj = make_object(config_api_version(), "ComputeDomain", name, namespace=plan.namespace, wave=Wave.CLAIMS,
                      component=f"workload/{plan.namespace}/{plan.name}", origin=plan.intent.source,
                      labels={WORKLOAD: plan.name}, annotations={SYNC_OPTIONS: MISSING_CRD_OK}, body={"spec": spec},
                      identity=plan.name, sources={"": ("spec.gpu.multiNode", "spec.gpu"),
                                                   "spec.numNodes": ("spec.gpu.multiNode.nodes", "spec.gpu.multiNode")})
    return obj, channel


def _image(image: str) -> tuple[str, str]:
    repository, _, tag = image.rpartition(":")
    return repository, tag


def nim_objects(plan: WorkloadPlan, claim: ClaimRef | None, compute_domain_name: str | None) -> list[KubeObject]:
    """NIMCache and NIMService; without `claim` the GPUs come from the device plugin (resources.limits)."""
    w = plan.workload
    model = w.spec.model
    assert model is not None
    api = nim_operator()["apiVersion"]
    component = f"workload/{plan.namespace}/{plan.name}"
    labels = {WORKLOAD: plan.name}
    ngc: dict[str, Any] = {"modelPuller": model.image, "authSecret": w.spec.secrets.ngc_api_key}
    if w.spec.secrets.image_pull:
        ngc["pullSecret"] = w.spec.secrets.image_pull
    model_sel: dict[str, Any] = {"precision": model.precision}
    if plan.tensor_parallelism is not None:  # None: alternatives of different sizes, so every profile is cached
        model_sel["tensorParallelism"] = str(plan.tensor_parallelism)
    if model.engine:
        model_sel["engine"] = model.engine
    ngc["model"] = model_sel
    assert plan.cache is not None  # every model's plan sizes its cache
    pvc = {"create": True, "size": plan.cache.text, "storageClass": w.spec.cache.storage_class,
           "volumeAccessMode": w.spec.cache.access_mode}
    cache_sources = {
        "": ("spec.model",), "spec.storage": ("spec.cache", "spec.model"),
        "spec.source.ngc.modelPuller": ("spec.model.image",),
        "spec.source.ngc.authSecret": ("spec.secrets.ngcApiKey", "spec.secrets"),
        "spec.source.ngc.pullSecret": ("spec.secrets.imagePull", "spec.secrets"),
        "spec.source.ngc.model.tensorParallelism": _count_sources(plan),
        **{f"spec.source.ngc.model.{k}": (f"spec.model.{k}", "spec.model") for k in ("precision", "engine")},
        **{f"spec.storage.pvc.{k}": (f"spec.cache.{field}", "spec.cache")
           for k, field in (("size", "size"), ("storageClass", "storageClass"), ("volumeAccessMode", "accessMode"))},
    }
    tolerate = tolerations(m.pool for m in plan.matches if m.ok)
    cache_spec: dict[str, Any] = {"source": {"ngc": ngc}, "storage": {"pvc": pvc}}
    if tolerate:  # the caching Job runs on GPU nodes and takes tolerations only from here (operators.yaml nimOperator.cacheJob)
        cache_spec["tolerations"] = tolerate
    # Named after what it caches (the model puller, which the NIM Operator's CRD makes immutable, the model and the
    # volume): a new image is a new NIMCache beside the old one, which the NIMService moves to, never an update the
    # operator refuses or a delete under a running NIMService. Tolerations stay out: they change in place.
    cache_name = hashed_name(plan.name, {"source": cache_spec["source"], "storage": cache_spec["storage"]},
                             max_length=nim_name_limit("NIMCache"))  # its caching Job is '<name>-job
    cache = make_object(api, "NIMCache", cache_name, namespace=plan.namespace, wave=Wave.NIM_CACHE, component=component,
                        origin=plan.intent.source, labels=labels, annotations={SYNC_OPTIONS: MISSING_CRD_OK},
                        body={"spec": cache_spec}, sources=cache_sources, identity=plan.name)

    repository, tag = _image(model.image)
    image: dict[str, Any] = {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}
    if w.spec.secrets.image_pull:
        image["pullSecrets"] = [w.spec.secrets.image_pull]
    dra: dict[str, Any] = ({"resourceClaimTemplateName": claim.name} if claim is not None and claim.kind == "ResourceClaimTemplate"
                           else {"resourceClaimName": claim.name} if claim is not None else {})
    if model.requests:
        dra["requests"] = list(model.requests)
    gpus: dict[str, Any] = ({"draResources": [dra]} if claim is not None
                            else {"resources": {"limits": {gpu_operator()["deviceResource"]: plan.gpus or 1}}})
    spec: dict[str, Any] = {
        "image": image,
        "authSecret": w.spec.secrets.ngc_api_key,
        "storage": {"nimCache": {"name": cache_name, "profile": ""}},
        "replicas": w.spec.replicas,
        **gpus,
        "expose": {"service": {"type": w.spec.expose.type, "port": w.spec.expose.port}},
    }
    share = gpu_share(plan)
    if share is not None:  # the engine's default takes ~90% of the GPU: cap it to this NIM's share
        spec["env"] = [{"name": name, "value": share} for name in nim_operator()["sharedGpuEnv"]]
    if tolerate:  # a DRA pod is not given the device plugin's extended-resource toleration
        spec["tolerations"] = tolerate
    if w.spec.gpu.multi_node is not None:
        spec["multiNode"] = {"backendType": "lws",
                             "parallelism": {"tensor": plan.tensor_parallelism, "pipeline": w.spec.gpu.multi_node.nodes}}
        if compute_domain_name:  # multi-node NVLink; elsewhere the nodes of a replica talk over the network
            spec["multiNode"]["computeDomain"] = {"create": False, "name": compute_domain_name}
    service = make_object(api, "NIMService", plan.name, namespace=plan.namespace, wave=Wave.NIM_SERVICE,
                          component=component, origin=plan.intent.source, labels=labels,
                          annotations={IMMUTABLE_FIELDS: ",".join(r.path for r in replacements_of("NIMService")),
                                       SYNC_OPTIONS: MISSING_CRD_OK},
                          body={"spec": spec}, sources=SERVICE_SOURCES)
    return [cache, service]


ENGINE_DEFAULT_SHARE = 0.9  # what a NIM's engine takes of each GPU when not told (NIM_KVCACHE_PERCENT default)


def gpu_share(plan: WorkloadPlan) -> str | None:
    """The fraction of each GPU's memory a NIM that shares its GPUs may take ("0.45"), rounded down; None when its
    GPUs are its own. Fractional: its gpu.memory of the smallest serving GPU. A share group: the engine default
    divided among the members in proportion to their sized need, so that together they take what one would."""
    w = plan.workload
    serving = [m.pool.full_gpu_memory_bytes for m in plan.matches if m.ok]
    if w.spec.model is None or not serving:
        return None
    if w.spec.gpu.fractional and w.spec.gpu.memory is not None:
        fraction = min(w.spec.gpu.memory.bytes / min(serving), ENGINE_DEFAULT_SHARE)
    elif w.spec.gpu.shared and plan.sizing is not None and plan.sizing.total_need:
        # every replica's pod uses the group's one claim, so each takes its part of this member's share
        fraction = ENGINE_DEFAULT_SHARE * plan.sizing.need / plan.sizing.total_need / max(w.spec.replicas, 1)
    else:
        return None
    return f"{max(math.floor(100 * fraction) / 100, 0.01):.2f}"


def namespace_object(cluster: ResolvedCluster, namespace: str, origin: SourceDoc, admin_access: bool = False) -> KubeObject:
    """A workloads' Namespace; with admin_access, the label without which the API server refuses a claim with adminAccess."""
    label = admin_access_label(cluster.api.minor) if admin_access else None
    sources: Sources = {"": ("metadata.namespace",), **({"metadata.labels": ("spec.gpu.adminAccess",)} if label else {})}
    return make_object("v1", "Namespace", namespace, wave=Wave.NODE_CONFIG, component="namespaces", origin=origin,
                       labels={label: "true"} if label else None, annotations={SYNC_OPTIONS: KEEP_NAMESPACE}, sources=sources)


SERVICE_SOURCES = {
    "": ("spec.model",), "spec.image": ("spec.model.image",),
    "spec.image.pullSecrets": ("spec.secrets.imagePull", "spec.secrets"),
    "spec.authSecret": ("spec.secrets.ngcApiKey", "spec.secrets"),
    "spec.replicas": ("spec.replicas", "spec.model"),
    "spec.draResources": ("spec.gpu", "spec.model"),
    "spec.draResources[0].requests": ("spec.model.requests", "spec.model"),
    "spec.expose": ("spec.expose", "spec.model"),
    "spec.expose.service.port": ("spec.expose.port", "spec.expose"),
    "spec.expose.service.type": ("spec.expose.type", "spec.expose"),
    "spec.multiNode": ("spec.gpu.multiNode", "spec.gpu"),
    "spec.storage": ("spec.cache", "spec.model"),
    "spec.env": ("spec.gpu.memory", "spec.gpu.sharing", "spec.gpu"),
}


def _count_sources(plan: WorkloadPlan) -> tuple[str, ...]:
    """Where the GPUs per replica (tensor parallelism) come from: the intent's count, or sizing."""
    return ("spec.gpu.count",) if isinstance(plan.workload.spec.gpu.count, int) else ("spec.model.parameters", "spec.model")
