"""What a team budget limits, key by key: the ResourceQuota (lower.quotas), the check (check.budgets), `gpuc plan`
and `gpuc diff` all read the same list.

The API server's quota counts devices per DeviceClass (facts/data/kubernetes.yaml deviceQuota): a budget of 8 on
gpu.nvidia.com says nothing about a claim that names another class selecting the same GPUs (a platform team's
hopper-80g.gpuc.dev, the extended-resource class that serves `nvidia.com/gpu`). So a budget covers every class of
the cluster that selects devices of a type it budgets (a whole GPU, a MIG slice, a VFIO GPU): those it lists with
their numbers, every other one at 0. The quota then refuses a claim through a class the budget does not list, and
the namespace holds at most the sum of the listed numbers of devices of that type, whatever class a claim names.
Every DeviceClass gpuc and the DRA driver's chart create starts from the driver and the device type (DESIGN.md 4.3),
which is how a class's type is read here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..facts.driver import builtin_class_device_types, builtin_classes
from ..validate.intents import Budget
from ..validate.resolved import ResolvedCluster
from . import selectors as sel
from .graph import KubeObject

CLAIMS = "claims"  # the key of the ResourceClaims limit, beside DeviceClass names


@dataclass(frozen=True)
class Limit:
    key: str  # a DeviceClass, or CLAIMS
    limit: int
    where: tuple[str | int, ...]  # the field of the Cluster intent that sets it
    device_type: str = ""  # the type of device the class selects, when known (gpu, mig, vfio, ...)
    covers: str = ""  # a class the budget does not list: the listed class of the same device type it is held at 0 beside

    @property
    def what(self) -> str:
        return "ResourceClaims" if self.key == CLAIMS else f"{self.key} devices"


def class_types(cluster: ResolvedCluster, objects: list[KubeObject]) -> dict[str, str]:
    """DeviceClass name -> the device type it selects, for the chart's classes and those gpuc emits."""
    types = builtin_class_device_types()
    out = {name: types[name] for name in builtin_classes(cluster.driver)}
    first = {sel.driver_and_type(t): t for t in set(types.values())}
    for obj in objects:
        if obj.kind == "DeviceClass":
            found = first.get(_first_expression(obj.manifest))
            if found is not None:
                out[obj.name] = found
    return out


def _first_expression(manifest: dict) -> str:
    """The CEL expression of a DeviceClass's first selector, "" where its shape holds none: the checks read objects a
    user may have damaged (a --state file, a hand edit), which get findings, never a traceback."""
    spec = manifest.get("spec")
    selectors = spec.get("selectors") if isinstance(spec, dict) else None
    selector = selectors[0] if isinstance(selectors, list) and selectors else None
    cel = selector.get("cel") if isinstance(selector, dict) else None
    expression = cel.get("expression") if isinstance(cel, dict) else None
    return expression if isinstance(expression, str) else ""


def budget_limits(budget: Budget, index: int, types: dict[str, str]) -> list[Limit]:
    """The budget's ResourceClaims limit, each class it lists, and each other class of a type it budgets at 0."""
    where = ("spec", "budgets", index)
    out = [Limit(CLAIMS, budget.claims, (*where, "claims"))] if budget.claims is not None else []
    out += [Limit(name, n, (*where, "devices", name), types.get(name, "")) for name, n in sorted(budget.devices.items())]
    listed = {types[name]: name for name in sorted(budget.devices, reverse=True) if name in types}
    out += [Limit(name, 0, (*where, "devices"), t, listed[t]) for name, t in sorted(types.items())
            if t in listed and name not in budget.devices]
    return out


def cluster_budget_limits(cluster: ResolvedCluster, objects: list[KubeObject]) -> list[tuple[Budget, list[Limit]]]:
    types = class_types(cluster, objects)
    return [(budget, budget_limits(budget, i, types)) for i, budget in enumerate(cluster.spec.budgets)]
