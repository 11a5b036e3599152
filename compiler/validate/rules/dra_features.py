"""Rules of the DRA features of Kubernetes 1.36/1.37 and driver 0.5: prioritized alternatives
(`gpu.alternatives` -> firstAvailable), fractional GPU memory (`sharing: Fractional` -> consumable
capacity), and the extended-resource bridge (`nodePools[].extendedResource`).

Each says when the cluster's Kubernetes lacks the feature gate (an error) or has it off by default (a
warning: the cluster may have turned it on), from the gate table in facts/data/kubernetes.yaml.
"""

from __future__ import annotations

import dataclasses

from ...diagnostics import Findings, did_you_mean, one_of
from ...facts.driver import consumable_shares_exclude
from ...facts.platform import admin_access_label, dra_gate_note, dra_gates
from ..documents import RESERVED_NAMESPACES, Fleet, Intent, target_clusters
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster
from .classes import check_require


def check_dra_features(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for w in fleet.workloads:
        gpu = w.model.spec.gpu
        if gpu.alternatives is not None:
            _check_alternatives(w, fleet, findings)
        if gpu.fractional or gpu.memory is not None:
            _check_fractional(w, findings)
        if gpu.admin_access:
            _check_admin_access(w, findings)
        for name in target_clusters(w.model, fleet):
            cluster = clusters.get(name)
            if cluster is None:
                continue
            if gpu.alternatives is not None:
                _gate(w, ("spec", "gpu", "alternatives"), "DRAPrioritizedList", cluster, findings, "alternatives (firstAvailable)")
            if gpu.fractional:
                _gate(w, ("spec", "gpu", "sharing"), "DRAConsumableCapacity", cluster, findings, "sharing: Fractional")
            if gpu.admin_access:
                _gate(w, ("spec", "gpu", "adminAccess"), "DRAAdminAccess", cluster, findings, "adminAccess")
                _check_admin_namespace(w, cluster, fleet, findings)
    for cluster in clusters.values():
        _check_dra_itself(cluster, findings)
        _check_consumable_shares(cluster, [w for w in fleet.workloads_on(cluster.name)], findings)
        _check_extended_resources(cluster, findings)


def _check_dra_itself(cluster: ResolvedCluster, findings: Findings) -> None:
    """On 1.32 and 1.33 DRA itself is a beta that is off by default, and its API versions are beta APIs the API
    server does not serve unless told to: everything gpuc writes depends on both."""
    gate = "DynamicResourceAllocation"
    note = dra_gate_note(gate, cluster.api.minor)
    if not note or cluster.spec.acknowledged("dra-beta"):
        return
    runtime = dra_gates()[gate].runtime_config.get(cluster.api.kubernetes, "")
    warning = cluster.intent.warning(
        ("spec", "kubernetesVersion"),
        f"{note}; the API server must also serve {cluster.api.api_version} (--runtime-config={runtime}), or nothing "
        "gpuc writes for this cluster applies",
        "upgrade to Kubernetes 1.34, where DRA is GA and on; if the cluster has both turned on, say so: "
        "spec.acknowledge: [{warning: dra-beta, reason: ...}]")
    findings.add(dataclasses.replace(warning, code="dra-beta"))


def _gate(intent: Intent, path: tuple, gate: str, cluster: ResolvedCluster, findings: Findings, what: str) -> None:
    note = dra_gate_note(gate, cluster.api.minor)
    if not note:
        return
    message = f"{what} on cluster '{cluster.name}' needs the Kubernetes feature gate {gate}: {note}"
    if dra_gates()[gate].stage(cluster.api.minor) is None:
        findings.add(intent.error(path, message, "target a newer cluster, or drop the field"))
    else:
        findings.add(intent.warning(path, message))


def _check_alternatives(w: Intent[GpuWorkload], fleet: Fleet, findings: Findings) -> None:
    gpu = w.model.spec.gpu
    path = ("spec", "gpu")
    alternatives = gpu.alternatives or []
    for field, given in (("count", gpu.count is not None), ("class", gpu.class_ is not None)):
        if given:
            findings.add(w.error(path + (field,), f"gpu.{field} and gpu.alternatives together: each alternative says its own {field}",
                                 f"move {field} into the alternatives"))
    for field, given in (("mig", gpu.mig is not None), ("fabric", gpu.fabric is not None), ("multiNode", gpu.multi_node is not None)):
        if given:
            findings.add(w.error(path + (field,), f"alternatives choose among full GPUs; they do not combine with gpu.{field}",
                                 f"drop gpu.{field}, or drop gpu.alternatives"))
    if gpu.fractional:
        findings.add(w.error(path + ("alternatives",), "sharing Fractional takes part of one GPU; it has no alternatives",
                             "drop gpu.alternatives, or use sharing Exclusive"))
    for i, alt in enumerate(alternatives):
        here = path + ("alternatives", i)
        if alt.count == "auto" and w.model.spec.model is None:
            findings.add(w.error(here + ("count",), "count: auto sizes from spec.model, which this workload does not have",
                                 "set a number of GPUs"))
        if alt.class_ is not None and alt.class_ not in fleet.classes:
            findings.add(w.error(here + ("class",), f"unknown device class '{alt.class_}'",
                                 did_you_mean(alt.class_, fleet.classes) or "declare it as a `kind: GpuDeviceClass` document"))
        elif alt.class_ is not None and fleet.classes[alt.class_].model.spec.mig is not None:
            findings.add(w.error(here + ("class",), f"device class '{alt.class_}' selects MIG devices; alternatives are full GPUs"))
        check_require(w, here + ("require",), alt.require, findings)


def _check_fractional(w: Intent[GpuWorkload], findings: Findings) -> None:
    spec = w.model.spec
    gpu = spec.gpu
    path = ("spec", "gpu")
    if not gpu.fractional:
        findings.add(w.error(path + ("memory",), f"gpu.memory is the GPU memory of a fractional claim; sharing is {gpu.sharing}",
                             "set `sharing: Fractional`, or drop memory"))
        return
    if gpu.memory is None:
        findings.add(w.error(path + ("sharing",), "sharing Fractional needs gpu.memory: how much of one GPU's memory each replica takes",
                             "add e.g. `memory: 16Gi`"))
    if gpu.count not in (None, 1):
        findings.add(w.error(path + ("count",), "sharing Fractional takes part of one GPU: count is 1",
                             "drop count, or use sharing Exclusive for several GPUs"))
    for field, given in (("mig", gpu.mig is not None), ("fabric", gpu.fabric is not None),
                         ("multiNode", gpu.multi_node is not None), ("shareGroup", gpu.share_group is not None)):
        if given:
            findings.add(w.error(path + (field,), f"sharing Fractional does not combine with gpu.{field}",
                                 "each replica gets its own claim for part of one whole GPU"))


def _check_admin_access(w: Intent[GpuWorkload], findings: Findings) -> None:
    """Management access looks at GPUs other claims hold; it does not run work on GPUs of its own."""
    spec = w.model.spec
    gpu = spec.gpu
    path = ("spec", "gpu")
    if spec.model is not None:
        findings.add(w.error(("spec", "model"), "adminAccess gives a management pod (monitoring, health checks) access to GPUs "
                             "other claims hold; a model served on them would share every GPU with their owners",
                             "drop spec.model and attach the claim to the management pod, or drop adminAccess"))
    if gpu.count == "auto":
        findings.add(w.error(path + ("count",), "count: auto sizes a model; an adminAccess claim takes every matching GPU of its node",
                             "drop count (every GPU of the node), or set a number"))
    if gpu.sharing != "Exclusive":
        findings.add(w.error(path + ("sharing",), f"adminAccess sees GPUs whatever their sharing; sharing {gpu.sharing} configures GPUs "
                             "a claim allocates", "drop sharing"))
    combined = [f for f, given in (("mig", gpu.mig), ("alternatives", gpu.alternatives), ("fabric", gpu.fabric),
                                   ("multiNode", gpu.multi_node), ("nics", gpu.nics), ("passthrough", gpu.passthrough)) if given]
    for field in combined:
        hint = ("firstAvailable subrequests cannot set adminAccess (Kubernetes API)" if field == "alternatives"
                else "adminAccess selects full GPUs (narrow them with gpu.require or gpu.class)")
        findings.add(w.error(path + (field,), f"adminAccess does not combine with gpu.{field}", hint))


def _check_admin_namespace(w: Intent[GpuWorkload], cluster: ResolvedCluster, fleet: Fleet, findings: Findings) -> None:
    """The API server admits adminAccess only in a namespace labelled for it, and then to anyone who may create claims there."""
    namespace = w.model.metadata.namespace
    label = admin_access_label(cluster.api.minor)
    if label is None:
        return
    owned = {cluster.spec.dra_driver.namespace, cluster.spec.gpu_operator.namespace}
    if cluster.spec.nim_operator is not None:
        owned.add(cluster.spec.nim_operator.namespace)
    if namespace in RESERVED_NAMESPACES or namespace in owned:
        findings.add(w.error(("metadata", "namespace"), f"adminAccess needs the namespace labelled {label}: \"true\", and gpuc does "
                             f"not create or label namespace '{namespace}' (it belongs to the cluster or to a chart)",
                             "give the management workload a namespace of its own, e.g. gpu-monitoring"))
        return
    others = sorted(o.model.metadata.name for o in fleet.workloads_on(cluster.name)
                    if o.model.metadata.namespace == namespace and not o.model.spec.gpu.admin_access)
    if others:
        findings.add(w.warning(("metadata", "namespace"), f"namespace '{namespace}' gets the label {label}: \"true\", so every claim "
                               f"created there may use adminAccess, and it also holds {one_of(others)}",
                               "give the management workload a namespace of its own"))


def _check_consumable_shares(cluster: ResolvedCluster, workloads: list[Intent[GpuWorkload]], findings: Findings) -> None:
    """The driver refuses some sharing strategies while consumable shares are on."""
    if not any(w.model.spec.gpu.fractional for w in workloads):
        return
    excluded = consumable_shares_exclude()
    for w in workloads:
        if w.model.spec.gpu.sharing in excluded:
            findings.add(w.error(("spec", "gpu", "sharing"),
                                 f"cluster '{cluster.name}' runs fractional workloads, and the DRA driver does not support "
                                 f"{w.model.spec.gpu.sharing} sharing while consumable shares are on",
                                 "use sharing TimeSlicing or Fractional here, or move one of them to another cluster"))


def _check_extended_resources(cluster: ResolvedCluster, findings: Findings) -> None:
    opted = [p for p in cluster.pools if p.spec.extended_resource]
    if not opted:
        return
    intent = cluster.intent
    for pool in opted:
        here = pool.path + ("extendedResource",)
        if pool.spec.allocation != "dra":
            findings.add(intent.error(here, f"node pool '{pool.name}' is allocated by the device plugin, which serves nvidia.com/gpu itself",
                                      "drop extendedResource, or set allocation: dra"))
        if pool.mig_dynamic:
            findings.add(intent.error(here, f"node pool '{pool.name}' creates MIG devices on demand; device-plugin style requests "
                                            "need full GPUs or a static MIG layout",
                                      "drop extendedResource, or use a static mig.layout"))
    note = dra_gate_note("DRAExtendedResource", cluster.api.minor)
    if note:
        where = opted[0].path + ("extendedResource",)
        message = f"extendedResource needs the Kubernetes feature gate DRAExtendedResource: {note}"
        if dra_gates()["DRAExtendedResource"].stage(cluster.api.minor) is None:
            findings.add(intent.error(where, message, "drop extendedResource, or upgrade the cluster"))
        else:
            findings.add(intent.warning(where, message))
    served = {p.gpu.key for p in opted if p.dra}
    for pool in cluster.dra_pools:
        if not pool.spec.extended_resource and pool.gpu.key in served:
            findings.add(intent.error(pool.path + ("extendedResource",),
                                      f"node pool '{pool.name}' has the same GPU model ({pool.gpu.key}) as a pool that serves "
                                      "extended resources, and a DeviceClass tells devices apart by their attributes, not their nodes",
                                      "set extendedResource on both pools, or on neither"))
