"""The extended-resource bridge (KEP-5004, DRAExtendedResource): DeviceClasses that let device-plugin style
pods (`resources.limits: {nvidia.com/gpu: 1}`) get their GPUs through DRA, from the pools that say so.

The DRA driver chart's own `gpu.nvidia.com` class already maps `nvidia.com/gpu` onto every GPU the driver
publishes (driver 25.12+, resource.k8s.io/v1). On a cluster that also runs device-plugin pools, that
turns every DRA pool into spill-over capacity for device-plugin pods, and a node where the device plugin
still runs hands the same GPU out twice. Kubernetes uses the newest class that maps a name, and gpuc's
classes sync after the chart (a later wave), so gpuc's class decides: it maps the name onto the GPUs of
the pools with `extendedResource: true` only, or onto none (a guard) when no pool serves them. MIG pools
that opt in get one class per profile, named as the device plugin names them (`nvidia.com/mig-1g.10gb`).
"""

from __future__ import annotations

from ..facts.platform import dra_gates
from ..validate.resolved import ResolvedCluster, ResolvedPool
from . import selectors as sel
from .graph import KubeObject, Wave
from .meta import make_object

GPU_RESOURCE = "nvidia.com/gpu"
CLASS_SUFFIX = "extended-resources.gpuc.dev"
GUARD = "extended-resources-guard"  # the component of a class that maps a name onto no device, on purpose


def _chart_maps_gpus(cluster: ResolvedCluster) -> bool:
    """The chart's gpu.nvidia.com class carries extendedResourceName, and the cluster honours it by default."""
    return (cluster.api.api_version == "resource.k8s.io/v1" and cluster.driver.at_least("25.12")
            and dra_gates()["DRAExtendedResource"].on_by_default(cluster.api.minor))


def extended_resource_classes(cluster: ResolvedCluster) -> list[KubeObject]:
    opted = [p for p in cluster.dra_pools if p.spec.extended_resource]
    mixed = any(p.device_plugin for p in cluster.pools)
    if not opted and not (mixed and _chart_maps_gpus(cluster)):
        return []
    full = [p for p in opted if p.publishes_full_gpus]
    out = [_class(cluster, f"gpu.{CLASS_SUFFIX}", GPU_RESOURCE, "gpu", [], full)]
    profiles = sorted({profile for p in opted if p.mig_layout for profile, _ in p.mig_layout})
    for profile in profiles:
        pools = [p for p in opted if p.mig_layout and profile in dict(p.mig_layout)]
        out.append(_class(cluster, f"mig-{profile}.{CLASS_SUFFIX}", f"nvidia.com/mig-{profile}", "mig", [sel.profile_is(profile)], pools))
    return out


def _class(cluster: ResolvedCluster, name: str, resource: str, device_type: str, extra: list[str],
           pools: list[ResolvedPool]) -> KubeObject:
    products = sorted({p.gpu.product_name for p in pools})
    expressions = [sel.driver_and_type(device_type), *extra]
    expressions.append(f"{sel.attribute('productName')} in [{', '.join(sel.literal(n) for n in products)}]" if products else "false")
    sources = {"": tuple(f"spec.nodePools[{p.index}].extendedResource" for p in pools) + ("spec.nodePools",)}
    return make_object(cluster.api.api_version, "DeviceClass", name, wave=Wave.DEVICE_CLASSES,
                       component="extended-resources" if pools else GUARD, origin=cluster.intent.source,
                       annotations={"gpuc.dev/extended-resource-pools": ",".join(p.name for p in pools) or "(none)"},
                       body={"spec": {"selectors": sel.selector_list(expressions), "extendedResourceName": resource}},
                       sources=sources)
