"""Node configuration (DESIGN.md section 4.2): GPU Operator values or a partial ClusterPolicy, the
mig-parted ConfigMap, and node labels per pool.

DRA needs CDI on, the device plugin off where DRA allocates (both would hand out the same GPUs), and
the container toolkit told to ignore NVIDIA_VISIBLE_DEVICES from unprivileged pods. MIG pools get a
mig-parted config the GPU Operator's MIG manager applies per node label.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from ..facts.driver import ChartRef
from ..facts.platform import gpu_operator, version_tuple
from ..validate.resolved import ResolvedCluster, ResolvedPool
from .graph import HelmRelease, KubeObject, Wave
from .meta import MISSING_CRD_OK, PATCH_FORCE, SYNC_OPTIONS, make_object
from .tolerations import uncovered

SSA_PATCH = "ServerSideApply=true,Prune=false,Delete=false"


def _env(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def _mig_pools(cluster: ResolvedCluster) -> list[ResolvedPool]:
    return [p for p in cluster.pools if p.mig_layout is not None or p.dynamic_partitions]


def op_before(cluster: ResolvedCluster, version: str) -> bool:
    mine = cluster.spec.gpu_operator.version
    return mine is not None and version_tuple(mine) < version_tuple(version)


def operator_installs_driver(cluster: ResolvedCluster) -> bool:
    """Whether the GPU Operator installs the GPU driver: the DRA driver reads it where the operator puts it."""
    return cluster.spec.dra_driver.nvidia_driver_root == gpu_operator()["driverRoot"]


def driver_install_dir(cluster: ResolvedCluster) -> dict[str, Any]:
    """`hostPaths.driverInstallDir` where the hosts' GPU driver lies outside `/` and the operator's own root: only there
    does the operator's driver validation find it (facts operators.yaml driverInstallDir). Nothing before the release
    that has the field (validation refuses that pairing)."""
    root = cluster.spec.dra_driver.nvidia_driver_root
    fact = gpu_operator()["driverInstallDir"]
    if root in ("/", gpu_operator()["driverRoot"]) or op_before(cluster, fact["since"]):
        return {}
    head, _, leaf = fact["value"].partition(".")
    return {head: {leaf: root}}


def _nfd_worker_defaults(cluster: ResolvedCluster) -> list[dict[str, Any]]:
    table = gpu_operator()["nfdWorkerTolerations"]
    mine = cluster.spec.gpu_operator.version
    known = sorted(table, key=version_tuple)
    fitting = [v for v in known if mine is None or version_tuple(v) <= version_tuple(mine)]
    return list(table[(fitting or known[:1])[-1]])  # before the table's first release: its oldest default


def operand_tolerations(cluster: ResolvedCluster) -> dict[str, Any]:
    """`daemonsets.tolerations` when a pool's taint is not among the operands' defaults (setting it replaces the
    chart's list, so the defaults are written back first)."""
    defaults = gpu_operator()["daemonsetTolerations"]
    extra = uncovered(cluster.pools, defaults)
    return {"daemonsets": {"tolerations": [*defaults, *extra]}} if extra else {}


def nfd_tolerations(cluster: ResolvedCluster) -> dict[str, Any]:
    """The chart's Node Feature Discovery worker tolerations when a pool's taint is not among its defaults: a
    Helm value of the chart only (no ClusterPolicy field), so mode patch and none leave NFD to its owner."""
    defaults = _nfd_worker_defaults(cluster)
    extra = uncovered(cluster.pools, defaults)
    return {"node-feature-discovery": {"worker": {"tolerations": [*defaults, *extra]}}} if extra else {}


def operator_settings(cluster: ResolvedCluster) -> dict[str, Any]:
    """The ClusterPolicy fields gpuc owns; the same keys serve as Helm values and as a partial ClusterPolicy."""
    facts = gpu_operator()
    has_dra = bool(cluster.dra_pools)
    has_device_plugin = any(p.device_plugin for p in cluster.pools)
    cdi: dict[str, Any] = {"enabled": True}
    if op_before(cluster, facts["cdiDefaultUntil"]):
        cdi["default"] = True  # before v25.10, cdi.enabled installs the specs and cdi.default makes the runtime use them
    settings: dict[str, Any] = {
        "cdi": cdi,
        "driver": {"enabled": operator_installs_driver(cluster)},
        "devicePlugin": {"enabled": has_device_plugin},
    }
    if has_dra:
        # the device plugin keeps the CDI device-list strategy the operator gives it (operatorDevicePluginEnv)
        settings["toolkit"] = {"env": _env(facts["toolkitEnv"])}
    settings.update(operand_tolerations(cluster))
    settings.update(driver_install_dir(cluster))
    if _mig_pools(cluster):
        settings["mig"] = {"strategy": "mixed"}
        settings["migManager"] = {"enabled": True, "config": {"name": facts["migConfigMapName"], "default": "all-disabled"}}
    return settings


def mig_parted_config(cluster: ResolvedCluster) -> dict[str, Any]:
    """A mig-parted v1 config holding exactly the configs this cluster's pools are labelled with."""
    configs: dict[str, list[dict[str, Any]]] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for pool in _mig_pools(cluster):
        if pool.dynamic_partitions:
            continue  # the MIG Manager stays off dynamic-MIG nodes (pool_labels)
        entry = {"devices": "all", "mig-enabled": True, "mig-devices": dict(pool.mig_layout or ())}
        if pool.mig_config and pool.mig_config.startswith("all-"):
            # Named configs are shared by every pool that uses them: filter by PCI device id per model.
            entry = {"device-filter": [f"{i}10DE" for i in pool.gpu.pci_device_ids], **entry}
            items = configs.setdefault(pool.mig_config, [])
            if entry not in items:
                items.append(entry)
        else:
            configs[pool.mig_config or pool.name] = [entry]
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}


def pool_labels(cluster: ResolvedCluster) -> dict[str, dict[str, str]]:
    facts = gpu_operator()
    out: dict[str, dict[str, str]] = {}
    uses_mig = bool(_mig_pools(cluster))
    for pool in cluster.pools:
        labels: dict[str, str] = {}
        if pool.dra:
            labels[facts["draNodeLabel"]] = "true"
            if cluster.mixed_allocation:
                labels[facts["devicePluginDeployLabel"]] = "false"
        elif not pool.device_plugin:  # held back by a staged change: neither plugin runs there
            labels[facts["devicePluginDeployLabel"]] = "false"
        if pool.dra and pool.spec.passthrough:  # DCGM holds the GPUs the kubelet plugin must rebind to vfio-pci
            stack = "gpuCluster" if cluster.spec.gpu_operator.mode == "gpuCluster" else "clusterPolicy"
            labels.update(dict.fromkeys(facts["passthroughOperandsOff"][stack], "false"))
        if pool.dynamic_partitions:  # mig-parted would clear the MIG devices the DRA driver creates for running pods, on
            labels[facts["migManagerDeployLabel"]] = "false"  # every pool whose GPUs the cluster's DynamicMIG gate partitions
        elif uses_mig and cluster.spec.gpu_operator.mode != "gpuCluster":  # no MIG Manager reads the label there
            labels[facts["migConfigLabel"]] = pool.mig_config or "all-disabled"
        labels.update(pool.spec.labels)  # the pool's own (a provider's, say); validation keeps them off gpuc's keys
        out[pool.name] = dict(sorted(labels.items()))
    return out


def gpu_cluster_values(cluster: ResolvedCluster, driver_values: dict[str, Any]) -> dict[str, Any]:
    """GPU Operator values for gpuOperator.mode gpuCluster: the chart deploys a GPUCluster resource instead
    of a ClusterPolicy, and that resource installs the DRA driver (values-v26.7.0.yaml, templates/gpucluster.yaml)."""
    dra: dict[str, Any] = {"version": "v" + cluster.spec.dra_driver.version.lstrip("v")}
    gates = driver_values.get("featureGates")
    if gates:
        dra["featureGates"] = gates
    shares = driver_values.get("consumableShares")
    if shares:  # the GPUCluster has no such value; the kubelet plugin reads the chart's env var (consumable-shares demo)
        dra["gpus"] = {"kubeletPlugin": {"env": [{"name": "CONSUMABLE_SHARES", "value": str(shares)}]}}
    dra["computeDomains"] = {"enabled": bool(driver_values["resources"]["computeDomains"]["enabled"])}
    # The chart refuses a GPUCluster beside its default driver daemonset (templates/validations.yaml): the driver
    # comes from the hosts, or from the NVIDIADriver resource the chart then creates.
    facts = gpu_operator()["gpuCluster"]
    driver = facts["operatorDriverValues"] if operator_installs_driver(cluster) else facts["hostDriverValues"]
    return {"clusterPolicy": {"deployCR": False}, "gpuCluster": {"deployCR": cluster.operator_resource}, "draDriver": dra,
            "hostPaths": {"driverInstallDir": cluster.spec.dra_driver.nvidia_driver_root}, **copy.deepcopy(driver),
            **operand_tolerations(cluster), **nfd_tolerations(cluster)}


def held_resource(cluster: ResolvedCluster) -> dict[str, Any]:
    """A staged change's step that holds the operator's custom resource back: the chart deploys no ClusterPolicy (GPU
    Operator 26.7+, `clusterPolicy.deployCR`), so it is gone before the GPUCluster that replaces it comes."""
    return {} if cluster.operator_resource else {"clusterPolicy": {"deployCR": False}}


DEVICE_PLUGIN_VALUES = "values/nvidia-device-plugin.yaml"


def device_plugin_values(cluster: ResolvedCluster) -> dict[str, Any]:
    """Values for a standalone NVIDIA device plugin release that keep it off the DRA pools' nodes: each of the
    chart's default affinity terms also requires the node not to carry the DRA label gpuc sets on DRA pools."""
    facts = gpu_operator()
    off_dra = {"key": facts["draNodeLabel"], "operator": "NotIn", "values": ["true"]}
    terms = [{"matchExpressions": [term, off_dra]} for term in facts["devicePluginChart"]["nodeSelectorTerms"]]
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}


def operator_release(cluster: ResolvedCluster, values: dict[str, Any]) -> HelmRelease:
    """The GPU Operator chart's release, in either mode; what it stops rendering is pruned in the background (its
    ClusterPolicy never goes in the foreground: facts/data/operators.yaml prunePropagation)."""
    facts, op = gpu_operator(), cluster.spec.gpu_operator
    return HelmRelease(name=facts["releaseName"], namespace=op.namespace,
                       chart=ChartRef(facts["chart"]["name"], facts["chart"]["repository"], op.version or ""),
                       values=values, wave=Wave.CHARTS, component="gpu-operator", origin=cluster.intent.source,
                       prune_propagation=facts["prunePropagation"])


def lower_node_config(cluster: ResolvedCluster, driver_values: dict[str, Any]
                      ) -> tuple[list[HelmRelease], list[KubeObject], dict[str, dict[str, str]]]:
    facts = gpu_operator()
    op = cluster.spec.gpu_operator
    ref = cluster.intent.source
    releases: list[HelmRelease] = []
    objects: list[KubeObject] = []
    if op.mode == "gpuCluster":
        releases.append(operator_release(cluster, gpu_cluster_values(cluster, driver_values)))
        labels = pool_labels(cluster)
        return releases, node_patches(cluster, labels), labels
    settings = operator_settings(cluster)
    if op.mode == "helm":
        releases.append(operator_release(cluster, {**settings, **nfd_tolerations(cluster), **held_resource(cluster)}))
    elif op.mode == "patch":
        objects.append(make_object(
            "nvidia.com/v1", "ClusterPolicy", facts["clusterPolicyName"], wave=Wave.NODE_CONFIG,
            component="node-config", origin=ref, annotations={SYNC_OPTIONS: f"{SSA_PATCH},{MISSING_CRD_OK}", **PATCH_FORCE},
            body={"spec": settings}, patch=True, managed=False,
            sources={"": ("spec.gpuOperator",), "spec.mig": ("spec.nodePools",), "spec.migManager": ("spec.nodePools",),
                     "spec.hostPaths": ("spec.draDriver.nvidiaDriverRoot",)}))
    if _mig_pools(cluster):
        text = yaml.safe_dump(mig_parted_config(cluster), sort_keys=False, default_flow_style=False)
        objects.append(make_object(
            "v1", "ConfigMap", facts["migConfigMapName"], namespace=op.namespace, wave=Wave.NODE_CONFIG,
            component="node-config", origin=ref, body={"data": {facts["migConfigMapKey"]: text}},
            sources={"": ("spec.nodePools",)}))
    labels = pool_labels(cluster)
    return releases, objects + node_patches(cluster, labels), labels


def node_patches(cluster: ResolvedCluster, labels: dict[str, dict[str, str]]) -> list[KubeObject]:
    """The labels of the pools that list nodeNames, as Node patches, whoever runs the operands: one mode without them
    would leave the nodes of the mode before with patches Argo CD may not prune (Delete=false), OutOfSync for good."""
    out = []
    for pool in cluster.pools:
        mates = cluster.node_mates(pool)
        if mates[0] is not pool:
            continue  # one patch per node, with the labels of every pool on it (validation keeps them consistent)
        merged = {k: v for p in mates for k, v in labels[p.name].items()}
        for node in pool.spec.node_names or []:
            if merged:
                out.append(make_object(
                    "v1", "Node", node, wave=Wave.NODE_CONFIG, component="node-config", origin=cluster.intent.source,
                    labels=dict(sorted(merged.items())), annotations={SYNC_OPTIONS: SSA_PATCH, **PATCH_FORCE}, patch=True,
                    managed=False, sources={"": (f"spec.nodePools[{pool.index}].nodeNames", f"spec.nodePools[{pool.index}]")}))
    return out
