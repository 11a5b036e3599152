"""Pulumi ComponentResources built from gpuc's compiled object graph (DESIGN.md section 7).

Nothing here builds a manifest: every resource is a compiled `KubeObject` or `HelmRelease` passed
through unchanged, so a stack applies exactly what `gpuc render` writes for the same cluster.
"""

from .cluster import GpuCluster
from .components import DeviceClasses, DraDriver, GpuNodeConfig, GpuShareGroup, GpuWorkload, NimOperator, WorkloadNamespaces

__all__ = ["GpuCluster", "DraDriver", "GpuNodeConfig", "NimOperator", "WorkloadNamespaces", "DeviceClasses",
           "GpuWorkload", "GpuShareGroup"]
