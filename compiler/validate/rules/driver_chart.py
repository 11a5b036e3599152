"""What the DRA driver chart gpuc installs does on the cluster beyond its values' keys: which API version its
DeviceClasses get, and which image a fork-only feature needs."""

from __future__ import annotations

from ...diagnostics import Findings
from ...facts.driver import chart_api_version, chart_keys, fabric_manager_partitioning, gates
from ..documents import Fleet
from ..features import cluster_features, derived_gates
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster


def check_driver_chart(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        if cluster.spec.gpu_operator.mode == "gpuCluster":
            continue  # the GPU Operator installs the driver: gpuc writes no driver chart
        _check_api_version(cluster, findings)
        _check_fork_image(cluster, findings)
    for cluster in clusters.values():
        _check_fabric_manager_nodes(cluster, [w.model for w in fleet.workloads_on(cluster.name)], findings)


def _check_api_version(cluster: ResolvedCluster, findings: Findings) -> None:
    """A chart without the resourceApiVersion value picks the newest resource.k8s.io version Helm's capabilities
    hold, and a Helm from 3.19 on holds resource.k8s.io/v1 for every cluster: on a cluster that does not serve it
    the chart's DeviceClasses fail to apply."""
    facts = chart_api_version()
    if facts["value"] in chart_keys(cluster.driver) or cluster.api.api_version == facts["pick"]:
        return
    if cluster.spec.acknowledged("helm-capabilities"):
        return
    findings.add(cluster.intent.error(
        ("spec", "draDriver", "version"),
        f"the {cluster.driver.versions} driver chart gives its DeviceClasses {facts['pick']} whenever Helm lists that "
        f"version, and Helm {facts['helmSince']}+ (Argo CD 3.4+, Helm 4) lists it for every cluster: Kubernetes "
        f"{cluster.api.kubernetes} serves {cluster.api.api_version} and refuses them",
        f"upgrade draDriver.version to 25.12.0 or newer (gpuc sets the chart's {facts['value']} to {cluster.api.api_version}), "
        f"or Kubernetes to 1.34; if the Helm that renders this chart is older than {facts['helmSince']}, say so: "
        "spec.acknowledge: [{warning: helm-capabilities, reason: ...}]"))


def _check_fork_image(cluster: ResolvedCluster, findings: Findings) -> None:
    """fabric topologyConfig turns on a gate only a fork knows; the upstream image refuses unknown gates at start-up."""
    spec = cluster.spec.dra_driver
    if spec.fabric != "topologyConfig":
        return
    image = spec.values.get("image") if isinstance(spec.values.get("image"), dict) else {}
    repository = image.get("repository")
    if repository and repository != cluster.driver.image:
        return
    build = gates()["FabricTopologySupport"].build
    findings.add(cluster.intent.error(
        ("spec", "draDriver", "values", "image", "repository") if repository else ("spec", "draDriver", "fabric"),
        f"fabric topologyConfig turns on the driver gate FabricTopologySupport, which only the fork {build} knows; the "
        f"upstream image {cluster.driver.image} refuses unknown gates and the kubelet plugin does not start",
        "name the fork's build in draDriver.values: image: {repository: <your registry>/<fork image>, tag: <its tag>}"))


def _check_fabric_manager_nodes(cluster: ResolvedCluster, workloads: list[GpuWorkload], findings: Findings) -> None:
    """With FabricManagerPartitioning on, the kubelet plugin of every DRA node opens Fabric Manager at start-up; GPUs
    without NVSwitch have no Fabric Manager, so the plugin would not start there."""
    gate = fabric_manager_partitioning()["gate"]
    spec = cluster.spec.dra_driver
    gates_value = spec.values.get("featureGates")
    derived = derived_gates(cluster.driver, cluster_features(cluster, workloads), spec.fabric)
    if not {**derived, **(gates_value if isinstance(gates_value, dict) else {})}.get(gate):
        return
    for pool in cluster.dra_pools:
        if not pool.gpu.nvlink_within_node:
            findings.add(cluster.intent.error(
                pool.path + ("gpu", "model"),
                f"the DRA driver runs with gate {gate} (for the workloads' NVLink partitions) on every node, and its kubelet "
                f"plugin opens Fabric Manager at start-up; {pool.gpu.key} nodes have no NVSwitch and no Fabric Manager, so "
                f"the plugin would not start on pool '{pool.name}'",
                "allocate this pool through the device plugin (allocation: devicePlugin), or run it in a cluster with "
                "fabric none"))
