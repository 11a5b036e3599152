"""Which driver features a cluster's workloads use, and the chart feature gates that follows.

Shared by validation (gate conflicts are input errors) and lowering (gates become chart values), so
the two can never disagree about what a cluster needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..facts.driver import DriverLine, capability_gates, gates_on
from .intents import GpuWorkload
from .resolved import ResolvedCluster


@dataclass(frozen=True)
class ClusterFeatures:
    sharing: frozenset[str]  # TimeSlicing / MPS used by some workload
    fabric: bool  # some workload asks for an NVLink partition
    compute_domains: bool  # some workload is multi-node
    dynamic_mig: bool  # some DRA pool lets the driver create MIG instances on demand
    gpu_resources: bool  # some pool is allocated through DRA
    fractional: bool = False  # some workload takes a fraction of a GPU's memory (consumable shares)
    passthrough: bool = False  # some DRA pool hands its GPUs to VMs (vfio-pci)

    def capabilities(self, fabric_flavour: str) -> list[str]:
        caps = sorted(self.sharing)
        if self.dynamic_mig:
            caps.append("DynamicMIG")
        if self.fractional:
            caps.append("Fractional")
        if self.passthrough:
            caps.append("Passthrough")
        if self.fabric and fabric_flavour in ("partitionAttributes", "topologyConfig"):
            caps.append(fabric_flavour)
        return caps


def cluster_features(cluster: ResolvedCluster, workloads: list[GpuWorkload]) -> ClusterFeatures:
    return ClusterFeatures(
        sharing=frozenset(s for w in workloads if (s := w.spec.gpu.driver_sharing) is not None),
        fabric=any(w.spec.gpu.fabric is not None for w in workloads),
        # ComputeDomains run only on multi-node NVLink pools (plan: WorkloadPlan.compute_domain)
        compute_domains=any(w.spec.gpu.multi_node is not None for w in workloads)
        and any(p.gpu.multi_node_nvlink for p in cluster.pools),  # device-plugin pools too: channels come through DRA
        dynamic_mig=any(p.mig_dynamic for p in cluster.dra_pools),
        gpu_resources=bool(cluster.dra_pools),
        fractional=any(w.spec.gpu.fractional for w in workloads),
        passthrough=any(p.spec.passthrough for p in cluster.dra_pools),
    )


def derived_gates(line: DriverLine, features: ClusterFeatures, fabric_flavour: str) -> dict[str, bool]:
    """Gates the workloads need turned on; empty on lines without a gate system (25.3)."""
    if not line.has_feature_gates:
        return {}
    known = gates_on(line)
    out = {}
    for cap in features.capabilities(fabric_flavour):
        for gate in capability_gates(cap):
            if gate in known:
                out[gate] = True
    return dict(sorted(out.items()))
