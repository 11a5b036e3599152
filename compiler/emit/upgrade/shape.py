"""What a compiled cluster runs, as far as a change to another one is concerned: the shape two sides are compared by."""

from __future__ import annotations

from dataclasses import dataclass

from ...facts.driver import kubelet_plugin_daemonset
from ...lower.graph import CompiledCluster, HelmRelease
from ...place import AllocationPlan
from ...place.inventory.synth import node_names


@dataclass(frozen=True)
class DriverRelease:
    """The DRA driver's own Helm release: who publishes gpu.nvidia.com devices on the DRA pools' nodes."""

    chart: str
    namespace: str
    name: str
    version: str
    daemonset: str  # its kubelet plugin's DaemonSet
    application: str  # its Argo CD Application ("" without gitops)

    @property
    def identity(self) -> tuple[str, str, str]:
        """What a chart upgrade keeps and a swap changes: the release Helm and Argo CD know it by."""
        return (self.chart, self.namespace, self.name)


@dataclass(frozen=True)
class PoolShape:
    name: str
    allocation: str  # dra | devicePlugin | none (held back by a step)
    mig: str  # the pool's MIG layout as the MIG Manager applies it: "" (none), "dynamic", or the config and its mix
    nodes: tuple[str, ...]
    gpus: int  # per node
    path: tuple  # intent field path of the pool


@dataclass(frozen=True)
class Shape:
    cluster: str
    kubernetes: str  # minor, "1.34"
    api_version: str  # resource.k8s.io/<version> the tree is written in
    driver: DriverRelease | None  # the standalone release, when there is one
    driver_by_operator: bool  # the GPU Operator's GPUCluster installs the driver
    operator: str  # the GPU Operator's custom resource gpuc deploys: ClusterPolicy | GPUCluster | "" (none, or not gpuc's)
    operator_mode: str  # gpuOperator.mode: helm | patch (a ClusterPolicy another team owns, gpuc patches it) | gpuCluster | none
    operator_version: str
    operator_namespace: str
    pools: dict[str, PoolShape]
    gitops_namespace: str

    @property
    def driver_runs(self) -> bool:
        return self.driver is not None or self.driver_by_operator

    def publisher(self, pool: str) -> str:
        """Who hands out the pool's GPUs: the device plugin, a DRA driver (by the release's identity), or nobody."""
        p = self.pools[pool]
        if p.allocation == "devicePlugin":
            return "device plugin"
        if p.allocation == "dra" and self.driver is not None:
            return "DRA driver release " + "/".join(self.driver.identity[1:])
        if p.allocation == "dra" and self.driver_by_operator:
            return "DRA driver of the GPUCluster"
        return ""


def _driver(compiled: CompiledCluster, release: HelmRelease | None) -> DriverRelease | None:
    if release is None:
        return None
    gitops = compiled.cluster.spec.gitops
    return DriverRelease(release.chart.name, release.namespace, release.name, release.chart.version,
                         kubelet_plugin_daemonset(release.chart.name, release.values),
                         f"{compiled.name}-{release.name}" if gitops else "")


def _mig(pool) -> str:
    if pool.mig_dynamic:
        return "dynamic"
    if pool.mig_layout is None:
        return ""
    return f"{pool.mig_config} " + ",".join(f"{p}x{n}" for p, n in pool.mig_layout)


def shape_of(compiled: CompiledCluster) -> Shape:
    cluster = compiled.cluster
    spec = cluster.spec
    driver = next((r for r in compiled.releases if r.component == "dra-driver"), None)
    mode = spec.gpu_operator.mode
    operator = ""
    if mode == "helm" and cluster.operator_resource:
        operator = "ClusterPolicy"
    elif mode == "gpuCluster" and cluster.operator_resource:
        operator = "GPUCluster"
    pools = {p.name: PoolShape(p.name, p.allocation, _mig(p), tuple(node_names(p)), p.spec.gpu.count, p.path) for p in cluster.pools}
    return Shape(cluster.name, cluster.api.kubernetes, cluster.api.api_version, _driver(compiled, driver),
                 mode == "gpuCluster" and cluster.operator_resource and cluster.driver_installed, operator, mode,
                 spec.gpu_operator.version or "", spec.gpu_operator.namespace, pools,
                 spec.gitops.namespace if spec.gitops else "")


def busy_pools(shape: Shape, placement: AllocationPlan | None) -> dict[str, tuple[str, ...]]:
    """The pods that hold devices on each pool (by the plan of what runs): a change that takes the devices away
    restarts them."""
    if placement is None:
        return {}
    pool_of = {node: p.name for p in shape.pools.values() for node in p.nodes}
    out: dict[str, list[str]] = {}
    for pod in placement.pods:
        if pod.node is not None and pod.node in pool_of and any(c.devices for c in pod.claims):
            out.setdefault(pool_of[pod.node], []).append(f"{pod.workload.split('/')[0]}/{pod.pod}")
    return {k: tuple(sorted(v)) for k, v in out.items()}
