"""Rules of the operators a cluster runs alongside the DRA driver."""

from __future__ import annotations

import dataclasses

from ...diagnostics import Findings
from ...facts.driver import dynamic_mig, gates
from ...facts.platform import gpu_operator, version_tuple
from ..documents import Fleet
from ..resolved import ResolvedCluster


def check_operator_modes(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        _check_operator_mode(cluster, findings)
        _check_dynamic_mig_mode(cluster, findings)
        _check_mixed_mig_modes(cluster, findings)
        _check_driver_upgrades(cluster, findings)
        _check_driver_install_dir(cluster, findings)
        if cluster.spec.gpu_operator.mode == "gpuCluster":
            _check_gpu_cluster_mode(cluster, findings)


def _check_dynamic_mig_mode(cluster: ResolvedCluster, findings: Findings) -> None:
    """The MIG Manager is kept off dynamic-MIG nodes (it clears the MIG devices the driver creates), and a GPUCluster
    runs none: nothing in gpuc's output enables MIG mode there. On Hopper and newer the kubelet plugin toggles MIG mode
    itself (and undoes a boot-time `nvidia-smi -mig 1`); on older GPUs enabling it takes a GPU reset, so it must be on
    before the plugin starts (facts dynamicMig)."""
    toggles = dynamic_mig().mig_mode_toggle
    pools = [p for p in cluster.pools if p.dynamic_partitions and p.gpu.architecture not in toggles]
    if not pools or cluster.spec.acknowledged("mig-mode"):
        return
    archs = sorted({p.gpu.architecture for p in pools})
    later = "" if cluster.driver.at_most(dynamic_mig().every_gpu_until) else (
        "; with it off when the plugin starts, driver 0.4+ publishes them as whole GPUs without MIG")
    warning = cluster.intent.warning(
        next((p for p in pools if p.mig_dynamic), pools[0]).path + ("mig", "layout"),
        f"nothing gpuc writes enables MIG mode on the {'/'.join(archs)} GPUs of dynamic-MIG pool(s) "
        f"{', '.join(p.name for p in pools)}: the MIG Manager is kept off them ({gpu_operator()['migManagerDeployLabel']}=false; "
        "mig-parted would clear the MIG devices the DRA driver creates for running pods), and the kubelet plugin turns MIG "
        f"mode on itself only on {' and '.join(sorted(toggles))} GPUs (on {'/'.join(archs)} that takes a GPU reset){later}",
        "enable MIG mode in the node image or a boot script (nvidia-smi -mig 1) and say so: "
        "spec.acknowledge: [{warning: mig-mode, reason: ...}]")
    findings.add(dataclasses.replace(warning, code="mig-mode"))


def _check_mixed_mig_modes(cluster: ResolvedCluster, findings: Findings) -> None:
    """DynamicMIG is one feature gate for the whole driver, so every kubelet plugin of the cluster runs with it, and
    at start a plugin in that mode destroys every MIG device its checkpoint does not name
    (cmd/gpu-kubelet-plugin/driver.go DestroyUnknownMIGDevices, v25.12.0 and main): on a static-MIG pool that is
    the layout the MIG Manager built, which the MIG Manager then builds again, under running pods."""
    static = [p for p in cluster.dra_pools if p.mig_layout is not None]
    if not cluster.dynamic_mig or not static:
        return
    names = ", ".join(f"'{p.name}'" for p in static)
    dynamic = [p for p in cluster.pools if p.mig_dynamic]
    if dynamic:
        where, why = dynamic[0].path + ("mig", "layout"), f"dynamic MIG on pool '{dynamic[0].name}' turns the driver's DynamicMIG gate on"
    else:
        where, why = ("spec", "draDriver", "values", "featureGates", "DynamicMIG"), "draDriver.values turn the driver's DynamicMIG gate on"
    findings.add(cluster.intent.error(
        where,
        f"{why} for every node, and a kubelet plugin in that mode destroys at start the MIG devices it did not create: the "
        f"static layout of pool(s) {names}, which the MIG Manager built and rebuilds",
        f"make every DRA MIG pool of the cluster dynamic (mig.layout: dynamic), or give pool(s) {names} allocation: "
        "devicePlugin, or run dynamic MIG in a cluster of its own"))


def _check_driver_upgrades(cluster: ResolvedCluster, findings: Findings) -> None:
    """An operator-installed GPU driver upgraded under a DRA kubelet plugin that stays bound to the old driver: the
    driver manager restarts the plugin only through a node label that exists in gpuCluster mode alone (beside a
    ClusterPolicy the operator deletes it, facts operators.yaml draDriverDeployLabel), so nothing gpuc can write
    restarts it here."""
    facts = gpu_operator()
    op = cluster.spec.gpu_operator
    if (op.mode not in ("helm", "patch") or not cluster.dra_pools or cluster.spec.dra_driver.nvidia_driver_root != facts["driverRoot"]
            or cluster.spec.acknowledged("driver-upgrade")):
        return
    warning = cluster.intent.warning(
        ("spec", "gpuOperator", "mode"),
        f"the GPU Operator installs the GPU driver beside a ClusterPolicy, and its driver manager does not restart the DRA "
        f"kubelet plugin when it upgrades that driver (it pauses the plugin through {facts['draDriverDeployLabel']}, which "
        "the operator deletes from every node outside gpuCluster mode): the plugin stays bound to the old driver's files "
        "and fails to prepare claims",
        "drain the DRA nodes before each GPU driver upgrade and say so: spec.acknowledge: [{warning: driver-upgrade, "
        "reason: ...}]; or put the driver in the node image: draDriver.nvidiaDriverRoot: / (gpuc then turns the operator's driver off)")
    findings.add(dataclasses.replace(warning, code="driver-upgrade"))


def _check_driver_install_dir(cluster: ResolvedCluster, findings: Findings) -> None:
    """A GPU driver on the hosts outside `/` is found by the operator's validator only through hostPaths.driverInstallDir,
    which GPU Operator releases before the fact's `since` do not have: every operand waits on that validation."""
    facts = gpu_operator()
    op = cluster.spec.gpu_operator
    root = cluster.spec.dra_driver.nvidia_driver_root
    since = facts["driverInstallDir"]["since"]
    if op.mode not in ("helm", "patch") or root in ("/", facts["driverRoot"]) or not op.version or version_tuple(op.version) >= version_tuple(since):
        return
    findings.add(cluster.intent.error(
        ("spec", "gpuOperator", "version"),
        f"GPU Operator {op.version} has no {facts['driverInstallDir']['value']}: its driver validation looks for the GPU driver "
        f"on the host's standard paths and under {facts['driverRoot']} only, never under {root}, and every operand waits on it",
        f"upgrade gpuOperator.version to {since} or newer (gpuc then sets {facts['driverInstallDir']['value']}: {root})"))


def _check_operator_mode(cluster: ResolvedCluster, findings: Findings) -> None:
    """With mode none another tool runs the GPU Operator: gpuc's mig-parted ConfigMap and MIG labels do
    nothing until that install's migManager reads the ConfigMap, and gpuc cannot keep that install's
    device plugin off the DRA pools (both would hand out the same GPUs: over-admission)."""
    op = cluster.spec.gpu_operator
    if op.mode == "none" and cluster.dra_pools and not cluster.spec.acknowledged("device-plugin-off"):
        label = gpu_operator()["devicePluginDeployLabel"]
        pools = ", ".join(p.name for p in cluster.dra_pools)
        findings.add(dataclasses.replace(cluster.intent.warning(
            ("spec", "gpuOperator", "mode"),
            f"with mode none gpuc cannot keep a device plugin off the DRA pools ({pools}); a device plugin and the DRA "
            "driver serving the same GPUs both hand them out, and pods get GPUs another pod holds",
            f"disable the device plugin of the GPU Operator you run on those nodes (devicePlugin.enabled=false, or node "
            f"label {label}=false), or use mode patch so gpuc sets it; a standalone NVIDIA device plugin chart takes the "
            f"affinity gpuc writes to values/nvidia-device-plugin.yaml; the DRA kubelet plugin runs only on nodes labelled "
            f"{gpu_operator()['draNodeLabel']}=true (node-labels.yaml); once it is off, say so: spec.acknowledge: "
            "[{warning: device-plugin-off, reason: ...}]"), code="device-plugin-off"))
    if op.mode == "none" and any(p.mig_layout is not None for p in cluster.pools):
        name = gpu_operator()["migConfigMapName"]
        findings.add(cluster.intent.warning(("spec", "gpuOperator", "mode"),
                                            f"MIG pools need the GPU Operator's migManager to read gpuc's ConfigMap '{name}' "
                                            f"(namespace {op.namespace}); with mode none gpuc cannot set that",
                                            f"set migManager.config.name={name} in the GPU Operator you run, or use mode patch"))


def _check_gpu_cluster_mode(cluster: ResolvedCluster, findings: Findings) -> None:
    """What a GPU Operator that installs the DRA driver (GPUCluster) cannot do, said where it is written.

    The GPUCluster resource cannot coexist with a ClusterPolicy, so the ClusterPolicy's operands are not
    there: no device plugin, no container toolkit, no MIG Manager; and it carries only the driver's
    image version, feature gates and compute-domain switch, not the DRA driver chart's other values."""
    facts = gpu_operator()["gpuCluster"]
    intent, spec = cluster.intent, cluster.spec
    op = spec.gpu_operator
    if not op.version:
        findings.add(intent.error(("spec", "gpuOperator"), "gpuOperator.mode gpuCluster needs gpuOperator.version (the chart version to install)",
                                  f"add `version: {facts['since']}` or newer"))
    elif version_tuple(op.version) < version_tuple(facts["since"]):
        findings.add(intent.error(("spec", "gpuOperator", "version"),
                                  f"GPU Operator {op.version} cannot install the DRA driver: the GPUCluster resource arrived in {facts['since']}",
                                  f"upgrade gpuOperator.version to {facts['since']} or newer, or use mode helm (gpuc installs the DRA driver chart)"))
    if not cluster.driver.at_least(facts["driverSince"]):
        findings.add(intent.error(("spec", "draDriver", "version"),
                                  f"the GPU Operator's GPUCluster runs the DRA driver image {facts['driverImage']} from {facts['driverSince']} on; "
                                  f"{spec.dra_driver.version} is a {cluster.driver.versions} release",
                                  "set draDriver.version to 0.5.1 (what GPU Operator 26.7.2 bundles), or use mode helm"))
    for pool in cluster.pools:
        if pool.mig_layout is not None:
            findings.add(intent.error(pool.path + ("mig", "layout"),
                                      f"node pool '{pool.name}' has a static MIG layout, but in gpuOperator.mode gpuCluster the GPU Operator "
                                      "runs no MIG Manager to partition the GPUs",
                                      "use `mig: {layout: dynamic}` (the DRA driver creates MIG devices per claim), or gpuOperator.mode helm"))
        if pool.spec.allocation != "dra":
            findings.add(intent.error(pool.path + ("allocation",),
                                      f"node pool '{pool.name}' is allocated by the device plugin, which a GPUCluster does not run "
                                      "(it cannot coexist with the ClusterPolicy that does)",
                                      "set allocation: dra, or run this cluster with gpuOperator.mode helm or patch"))
    allowed = set(facts["driverValues"])
    for key in spec.dra_driver.values:
        if key not in allowed:
            findings.add(intent.error(("spec", "draDriver", "values", key),
                                      f"in gpuOperator.mode gpuCluster the GPU Operator installs the DRA driver, and its GPUCluster resource "
                                      f"takes only {', '.join(sorted(allowed))} of the driver chart's values, not '{key}'",
                                      "remove it, or use gpuOperator.mode helm to install the DRA driver chart with these values"))
    if "namespace" in spec.dra_driver.model_fields_set and spec.dra_driver.namespace != op.namespace:
        findings.add(intent.error(("spec", "draDriver", "namespace"),
                                  f"in gpuOperator.mode gpuCluster the DRA driver runs in the GPU Operator's namespace ({op.namespace})",
                                  "remove draDriver.namespace"))
    if spec.dra_driver.fabric == "topologyConfig":
        findings.add(intent.error(("spec", "draDriver", "fabric"),
                                  f"fabric topologyConfig needs the driver fork {gates()['FabricTopologySupport'].build}; the GPU Operator "
                                  f"installs the upstream image {facts['driverImage']}",
                                  "use fabric partitionAttributes (driver 0.5+), or mode helm with the fork's chart"))
    operator_root = gpu_operator()["driverRoot"]
    if spec.dra_driver.nvidia_driver_root not in ("/", operator_root):
        findings.add(intent.warning(("spec", "draDriver", "nvidiaDriverRoot"),
                                    f"neither the GPUCluster resource nor gpuc's GPU Operator values install a GPU driver under "
                                    f"{spec.dra_driver.nvidia_driver_root}",
                                    f"install the driver on the hosts (nvidiaDriverRoot: /), let the operator install it "
                                    f"(nvidiaDriverRoot: {operator_root}: gpuc turns on its NVIDIADriver resource), or make sure "
                                    "the node image installs it there"))

