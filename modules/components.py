"""The ComponentResources a cluster's stack is made of, one per compiled component.

They group the compiled objects the way a reviewer thinks of them (the DRA driver, node
configuration, one GPU workload) so `pulumi preview` shows a tree, not a flat list. Their children
are registered by `GpuCluster`, because apply order crosses components (a workload's NIMService
waits for every claim of the cluster, as in an Argo CD sync wave).
"""

from __future__ import annotations

from typing import ClassVar

import pulumi


class CompiledComponent(pulumi.ComponentResource):
    """A group of compiled objects; a subclass only says what it holds. Its type token is
    `gpuc:index:<class name>`, so tokens and class names cannot disagree."""

    TYPE: ClassVar[str]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.TYPE = f"gpuc:index:{cls.__name__}"

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)


class DraDriver(CompiledComponent):
    """The NVIDIA DRA driver Helm release."""


class GpuNodeConfig(CompiledComponent):
    """GPU Operator release or partial ClusterPolicy, the mig-parted ConfigMap and Node label patches."""


class NimOperator(CompiledComponent):
    """The NIM Operator Helm release (it brings the NIMCache and NIMService CRDs)."""


class WorkloadNamespaces(CompiledComponent):
    """Namespaces the workloads live in that no chart creates."""


class TeamBudgets(CompiledComponent):
    """The ResourceQuotas that hold each team's namespace to its GPU budget (Cluster spec.budgets)."""


class DeviceClasses(CompiledComponent):
    """The fleet's own DeviceClasses (never the chart's built-in ones)."""


class GpuWorkload(CompiledComponent):
    """One GpuWorkload: its claim template, ComputeDomain, NIMCache and NIMService."""


class GpuShareGroup(CompiledComponent):
    """The one ResourceClaim the workloads of a share group use together."""


class UnknownComponent(Exception):
    """The compiler produced a component this package has no ComponentResource for."""


# compiled component (the part before the first "/") -> ComponentResource class and its Pulumi name
_FIXED: dict[str, tuple[type[CompiledComponent], str]] = {
    "dra-driver": (DraDriver, "dra-driver"),
    "gpu-operator": (GpuNodeConfig, "node-config"),
    "node-config": (GpuNodeConfig, "node-config"),
    "nim-operator": (NimOperator, "nim-operator"),
    "namespaces": (WorkloadNamespaces, "namespaces"),
    "budgets": (TeamBudgets, "budgets"),
    "device-classes": (DeviceClasses, "device-classes"),
    "extended-resources": (DeviceClasses, "device-classes"),
    "extended-resources-guard": (DeviceClasses, "device-classes"),
}
_PER_ITEM: dict[str, type[CompiledComponent]] = {"workload": GpuWorkload, "share-group": GpuShareGroup}


def component_for(component: str) -> tuple[type[CompiledComponent], str]:
    """`workload/research/trainer` -> (GpuWorkload, `research/trainer`)."""
    if component in _FIXED:
        return _FIXED[component]
    head, _, rest = component.partition("/")
    if head in _PER_ITEM and rest:
        return _PER_ITEM[head], rest
    raise UnknownComponent(f"no Pulumi component for compiled component '{component}'")
