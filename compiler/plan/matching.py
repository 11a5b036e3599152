"""Which node pools of a cluster can serve a workload, judged from catalog attributes.

This is the coarse, per-pool view used for sizing and for early error messages. The device-level
answer (does every pod get its devices) is the allocator's job in `gpuc plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..facts.catalog import host_defaults
from ..validate.intents import GpuWorkload, Require
from ..validate.resolved import ResolvedCluster, ResolvedPool, channel_only
from ..validate.types import normalize_version


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in normalize_version(v).split("."))


def require_mismatch(pool: ResolvedPool, require: Require | None) -> str:
    """Why a pool's GPUs fail `require`, or "" when they satisfy it (raw CEL is not judged here)."""
    if require is None:
        return ""
    gpu = pool.gpu
    if require.architecture and gpu.architecture not in require.architecture:
        return f"architecture is {gpu.architecture}"
    if require.product_name and gpu.product_name != require.product_name:
        return f"productName is '{gpu.product_name}'"
    if require.min_memory and pool.full_gpu_memory_bytes < require.min_memory.bytes:
        return f"memory is {pool.full_gpu_memory_bytes / 1024**3:.1f}Gi < {require.min_memory}"
    if require.min_compute_capability and _version_key(gpu.compute_capability) < _version_key(require.min_compute_capability):
        return f"compute capability is {gpu.compute_capability}"
    driver = pool.spec.driver_version or host_defaults()["driverVersion"]
    if require.min_driver_version and _version_key(driver) < _version_key(require.min_driver_version):
        return f"driver is {driver}"
    return ""


@dataclass(frozen=True)
class PoolMatch:
    pool: ResolvedPool
    reason: str  # "" when the pool can serve the workload

    @property
    def ok(self) -> bool:
        return not self.reason


def match_pools(cluster: ResolvedCluster, workload: GpuWorkload, class_require: Require | None,
                alternative: Require | None = None) -> list[PoolMatch]:
    """Which pools can serve the workload (or, with `alternative`, that alternative of it: its own require
    on top of the workload's)."""
    gpu = workload.spec.gpu
    out = []
    for pool in cluster.pools:
        reason = ""
        if pool.spec.allocation != "dra":  # as the intent allocates it: a pool a step holds back serves later
            # a multi-node NVLink pool on the device plugin still gets its IMEX channels through DRA (the
            # driver with GPUs off and ComputeDomains on): whole GPUs as nvidia.com/gpu, nothing finer
            if not channel_only(pool, gpu):
                reason = "allocated by the device plugin"
        elif gpu.mig is not None:
            missing = [s.profile for s in gpu.mig.slices if s.profile not in pool.mig_profiles]
            offered = pool.gpu.mig.profiles if pool.gpu.mig else {}
            if missing and not offered:
                reason = f"{pool.gpu.key} GPUs have no MIG"
            elif missing and pool.mig_layout is None and not pool.dynamic_partitions:
                reason = ("not in MIG mode (set nodePools[].mig to give it MIG devices)" if all(p in offered for p in missing)
                          else f"not in MIG mode, and {pool.gpu.key} GPUs have no MIG {', '.join(p for p in missing if p not in offered)}")
            elif missing:
                layout = f" in layout {pool.mig_config}" if pool.mig_config else ""
                reason = f"no MIG {', '.join(missing)}{layout}"
        elif not pool.publishes_full_gpus:
            reason = ("GPUs are in static MIG mode (no full-GPU devices)" if pool.mig_layout is not None else
                      f"its {pool.gpu.architecture} GPUs are in MIG mode for dynamic MIG, and driver "
                      f"{cluster.spec.dra_driver.version} publishes no full GPU of them")
        elif gpu.fabric is not None and cluster.spec.dra_driver.fabric == "none" and not pool.gpu.nvlink_within_node:
            reason = "its GPUs are not NVLink-connected (no NVSwitch)"
        elif gpu.fabric is not None and gpu.fabric.partition_size and gpu.fabric.partition_size > pool.spec.gpu.count:
            reason = f"fewer than {gpu.fabric.partition_size} GPUs per node"
        elif (gpu.fabric is not None and cluster.spec.dra_driver.fabric != "none" and gpu.fabric.partition_size
              and gpu.fabric.partition_size not in pool.partitions):
            reason = f"no NVLink partitions of {gpu.fabric.partition_size}"
        elif gpu.fractional and pool.dynamic_partitions:
            reason = "its GPUs are MIG-partitioned on demand; fractional GPU memory needs whole GPUs the driver shares"
        elif gpu.fractional and gpu.memory is not None and gpu.memory.bytes > pool.gpu.memory_bytes:
            reason = f"memory is {pool.gpu.memory_mib / 1024:.1f}Gi < {gpu.memory}"
        if not reason and pool.spec.passthrough != gpu.passthrough:
            reason = ("its GPUs go to VMs (passthrough); only gpu.passthrough workloads use them" if pool.spec.passthrough
                      else "not a passthrough pool (nodePools[].passthrough)")
        if not reason and gpu.nics is not None and pool.spec.nics is None:
            reason = "declares no NICs (nodePools[].nics) to align with its GPUs"
        reason = (reason or require_mismatch(pool, gpu.require) or require_mismatch(pool, class_require)
                  or require_mismatch(pool, alternative))
        out.append(PoolMatch(pool, reason))
    return out
