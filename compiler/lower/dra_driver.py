"""The DRA driver Helm release (DESIGN.md section 4.1): chart and repository by driver line, values
derived from the cluster and its workloads, then the user's `values` deep-merged on top."""

from __future__ import annotations

import copy
from typing import Any

from ..facts.driver import chart_for, driver_lines, kubelet_plugin_tolerations
from ..facts.platform import gpu_operator
from ..validate.features import ClusterFeatures, derived_gates
from ..validate.resolved import ResolvedCluster
from .graph import HelmRelease, Wave
from .tolerations import uncovered


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` wins; maps merge key by key, everything else (lists included) is replaced, as in Helm."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def driver_values(cluster: ResolvedCluster, features: ClusterFeatures) -> dict[str, Any]:
    spec = cluster.spec.dra_driver
    values: dict[str, Any] = {
        "nvidiaDriverRoot": spec.nvidia_driver_root,
        "resources": {
            "gpus": {"enabled": features.gpu_resources},
            "computeDomains": {"enabled": features.compute_domains},
        },
    }
    if features.gpu_resources:
        # The chart refuses gpus.enabled without this acknowledgement that no device plugin serves
        # the same GPUs; gpuc guarantees that by allocation mode per pool.
        values["gpuResourcesEnabledOverride"] = True
    gates = derived_gates(cluster.driver, features, spec.fabric)
    if gates:
        values["featureGates"] = gates
    if features.fractional:
        values["consumableShares"] = "memory"  # a claim without an amount still takes the whole GPU
    if cluster.driver.at_least("25.12"):
        values["resourceApiVersion"] = cluster.api.api_version
    plugin: dict[str, Any] = {}
    facts = gpu_operator()
    if cluster.mixed_allocation or cluster.spec.gpu_operator.mode == "none":
        # a device plugin serves the other GPU nodes: in a mixed cluster the operator's, with mode none the one whose
        # affinity gpuc writes to values/nvidia-device-plugin.yaml (off the DRA label), so the DRA plugin stays on it
        plugin["nodeSelector"] = {facts["draNodeLabel"]: "true"}
    # where the kubelet plugin must run: the DRA pools, and the multi-node NVLink pools whose ComputeDomain
    # channels it serves while their GPUs stay on the device plugin
    served = [p for p in cluster.pools if p.dra or (features.compute_domains and p.gpu.multi_node_nvlink)]
    defaults = kubelet_plugin_tolerations(cluster.driver)
    extra = uncovered(served, defaults)
    if extra:  # setting the value replaces the chart's defaults (0.4+: nvidia.com/gpu), so they are written back
        plugin["tolerations"] = [*defaults, *extra]
    if plugin:
        values["kubeletPlugin"] = plugin
    return deep_merge(values, spec.values)


def lower_dra_driver(cluster: ResolvedCluster, features: ClusterFeatures) -> tuple[HelmRelease | None, dict[str, Any]]:
    """The driver's release and its values; no release when the GPU Operator installs the driver
    (gpuOperator.mode gpuCluster), whose values then say what that install amounts to."""
    values = driver_values(cluster, features)
    if cluster.spec.gpu_operator.mode == "gpuCluster":
        return None, values
    chart = chart_for(cluster.spec.dra_driver.version)
    formerly = tuple(sorted({line.chart_name for line in driver_lines().values()} - {chart.name}))
    release = HelmRelease(name=chart.name, namespace=cluster.spec.dra_driver.namespace, chart=chart, values=values,
                          wave=Wave.CHARTS, component="dra-driver", origin=cluster.intent.source, formerly=formerly)
    return release, values
