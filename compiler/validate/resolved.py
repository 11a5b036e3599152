"""A Cluster intent joined with the facts it names: API version, driver line, catalog GPU, MIG layout.

Resolution happens once, during validation; every later stage reads these records instead of
re-parsing version strings or re-looking-up the catalog.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..facts.catalog import GpuModel
from ..facts.driver import DriverLine
from ..facts.platform import ResourceApi
from .documents import Intent
from .intents import Cluster, NodePool


@dataclass(frozen=True)
class ResolvedPool:
    spec: NodePool
    index: int  # position in spec.nodePools, for error paths
    gpu: GpuModel
    mig_layout: tuple[tuple[str, int], ...] | None  # static MIG instances per GPU, None without static MIG
    mig_dynamic: bool  # the pool asks for dynamic MIG (mig.layout: dynamic): its owners enable MIG mode where that needs it
    mig_config: str | None  # mig-parted config name the nodes get labelled with
    # With the cluster's DynamicMIG gate on (one for the whole driver), whether the driver publishes this pool's GPUs as
    # dynamic MIG partitions, and whether the full GPU beside them (facts dynamicMig: per line and architecture)
    dynamic_partitions: bool = False
    dynamic_full_gpu: bool = True
    # who serves the GPUs: the pool's `allocation`, or what a staged change's step holds it at (spec.transition):
    # dra | devicePlugin | none (neither, while the pool is handed over)
    allocation: str = "dra"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dra(self) -> bool:
        return self.allocation == "dra"

    @property
    def device_plugin(self) -> bool:
        return self.allocation == "devicePlugin"

    @property
    def partitions(self) -> tuple[int, ...]:
        return tuple(self.spec.nvlink.partitions) if self.spec.nvlink else ()

    @property
    def publishes_full_gpus(self) -> bool:
        """Static MIG hides the parent GPU from ResourceSlices; dynamic MIG keeps it, but on an Ampere GPU in MIG mode."""
        return self.mig_layout is None and (not self.dynamic_partitions or self.dynamic_full_gpu)

    @property
    def full_gpu_memory_bytes(self) -> int:
        """The `memory` its full-GPU devices publish: with DynamicMIG that of the largest MIG profile, the most a claim can
        get as one device (facts dynamicMig; ../shared/reference/hardware: 81152Mi on an H100 of 81559Mi)."""
        if self.dynamic_partitions and self.gpu.mig:
            return max(p.memory_bytes for p in self.gpu.mig.profiles.values())
        return self.gpu.memory_bytes

    @property
    def mig_profiles(self) -> dict[str, int]:
        if self.dynamic_partitions and self.gpu.mig:
            return {p.name: p.max_instances for p in self.gpu.mig.profiles.values()}
        return dict(self.mig_layout or ())

    @property
    def path(self) -> tuple:
        return ("spec", "nodePools", self.index)

    @property
    def devices(self) -> int:
        """Devices the pool's nodes publish, as placement synthesizes them: each GPU (unless static MIG hides it)
        and each MIG instance it may hold."""
        per_gpu = (1 if self.publishes_full_gpus else 0) + sum(self.mig_profiles.values())
        return self.spec.nodes * self.spec.gpu.count * per_gpu


@dataclass(frozen=True)
class ResolvedCluster:
    intent: Intent[Cluster]
    api: ResourceApi
    driver: DriverLine
    pools: tuple[ResolvedPool, ...]
    provider: str | None = None  # managed Kubernetes provider: spec.provider, or recognised in --state (facts.providers)
    provider_detected: bool = False  # recognised from the state's node labels, not written in the intent
    dynamic_mig: bool = False  # the DRA driver runs with gate DynamicMIG: a pool asks for it, or draDriver.values set it
    driver_installed: bool = True  # False during a staged change's step that holds the DRA driver release back
    operator_resource: bool = True  # False during a step whose GPU Operator chart deploys neither ClusterPolicy nor GPUCluster

    @property
    def name(self) -> str:
        return self.intent.model.metadata.name

    @property
    def spec(self):
        return self.intent.model.spec

    @property
    def dra_pools(self) -> tuple[ResolvedPool, ...]:
        return tuple(p for p in self.pools if p.dra)

    def node_mates(self, pool: ResolvedPool) -> tuple[ResolvedPool, ...]:
        """The pools on `pool`'s nodes, itself included, in pool order: one per GPU model of nodes that hold
        several (pools listing the same nodeNames)."""
        if not pool.spec.node_names:
            return (pool,)
        nodes = set(pool.spec.node_names)
        return tuple(p for p in self.pools if p.spec.node_names and set(p.spec.node_names) == nodes)

    def gpu_offset(self, pool: ResolvedPool) -> int:
        """The index of the pool's first GPU on its nodes: the GPUs of the pools before it on the same nodes."""
        mates = self.node_mates(pool)
        return sum(p.spec.gpu.count for p in mates[:mates.index(pool)])

    @property
    def mixed_allocation(self) -> bool:
        """Some pools are DRA and others are not (device plugin, or held back by a staged change): the DRA kubelet
        plugin then runs only on nodes labelled for it."""
        return any(p.dra for p in self.pools) and any(not p.dra for p in self.pools)

    @property
    def transition(self):
        return self.spec.transition

    def as_intended(self) -> ResolvedCluster:
        """The cluster as its intent has it, nothing held back by a staged change's step: what its output is checked
        against (a claim is right or wrong whether or not a step lets it be allocated yet)."""
        if self.transition is None:
            return self
        pools = tuple(dataclasses.replace(p, allocation=p.spec.allocation) for p in self.pools)
        return dataclasses.replace(self, pools=pools, driver_installed=True, operator_resource=True)

    @property
    def driver_runs(self) -> bool:
        """A DRA driver serves the cluster: neither its own release nor the GPUCluster that installs it is held back."""
        return self.driver_installed and (self.spec.gpu_operator.mode != "gpuCluster" or self.operator_resource)


def channel_only(pool: ResolvedPool, gpu: Any) -> bool:
    """A multi-node workload on a device-plugin pool of multi-node NVLink GPUs: GPUs as nvidia.com/gpu limits,
    the ComputeDomain channel through DRA (no MIG, sharing, fractions, partitions or alternatives there)."""
    return (pool.spec.allocation == "devicePlugin" and gpu.multi_node is not None and pool.gpu.multi_node_nvlink and gpu.mig is None
            and not gpu.fractional and gpu.fabric is None and gpu.alternatives is None
            and (gpu.sharing is None or gpu.sharing == "Exclusive"))
