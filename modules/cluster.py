"""`GpuCluster`: everything one compiled cluster holds, as Pulumi resources.

It walks the compiled releases and objects in wave order, puts each under its component, and gives it
the wave dependencies and replacement options the compiled graph declares. Argo CD Applications
(`CompiledCluster.gitops`) are not registered: Pulumi itself is the deployer here. With `charts=False`
the Helm releases are not registered either: another tool installs the charts (an Argo CD that syncs the
chart Applications, a platform pipeline), and the stack applies what gpuc adds on top.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from compiler.lower.graph import CompiledCluster, HelmRelease, KubeObject, Wave

from .components import CompiledComponent, component_for
from .helm import release_factory, release_options
from .kinds import object_factory
from .ordering import WaveBarrier, replacement_options

Item = HelmRelease | KubeObject


@dataclass(frozen=True)
class _Planned:
    """One release or object, with everything needed to register it."""

    key: tuple[str, str, str]  # (kind, namespace, name); kind "HelmRelease" for releases
    wave: Wave
    component: tuple[type[CompiledComponent], str]
    register: Callable[[pulumi.ResourceOptions], pulumi.CustomResource]
    options: dict[str, Any]


def _plan_item(item: Item, chart_root: Path) -> _Planned:
    component = component_for(item.component)
    if isinstance(item, HelmRelease):
        return _Planned(("HelmRelease", item.namespace, item.name), item.wave, component, release_factory(item, chart_root),
                        release_options(item))
    return _Planned(item.key, item.wave, component, object_factory(item), replacement_options(item.replacements))


def _plan(compiled: CompiledCluster, chart_root: Path, charts: bool) -> list[_Planned]:
    """Releases and objects by wave (a stable sort keeps the compiler's order within a wave), worked out
    before anything is registered: an object the SDK cannot express, or a chart folder that is missing,
    fails the run up front instead of leaving a half-applied cluster."""
    items: list[Item] = [*(compiled.releases if charts else []), *compiled.sorted_objects()]
    return [_plan_item(item, chart_root) for item in sorted(items, key=lambda item: int(item.wave))]


class GpuCluster(CompiledComponent):
    """The root of a stack: one cluster's DRA driver, node configuration, classes and workloads.

    `resources` maps (kind, namespace, name) to the registered resource ("HelmRelease" for releases),
    for programs that add their own resources on top (`depends_on=[cluster.resources[...]]`).
    `chart_root` is where the chart folders of a `charts.directory` source are (the project root);
    `charts=False` leaves the Helm releases to another tool.
    """

    def __init__(self, compiled: CompiledCluster, opts: pulumi.ResourceOptions | None = None, *,
                 chart_root: Path = Path("."), charts: bool = True) -> None:
        planned = _plan(compiled, chart_root, charts)
        super().__init__(compiled.name, opts)
        self.components: dict[tuple[type[CompiledComponent], str], CompiledComponent] = {}
        self.resources: dict[tuple[str, str, str], pulumi.CustomResource] = {}
        barrier = WaveBarrier()
        for plan in planned:
            resource = plan.register(pulumi.ResourceOptions(
                parent=self._component(plan.component), depends_on=barrier.dependencies(plan.wave), **plan.options))
            barrier.add(plan.wave, resource)
            self.resources[plan.key] = resource
        for component in self.components.values():
            component.register_outputs({})
        self.register_outputs({"objects": len(compiled.objects), "releases": len(compiled.releases) if charts else 0})

    def _component(self, key: tuple[type[CompiledComponent], str]) -> CompiledComponent:
        if key not in self.components:
            cls, name = key
            self.components[key] = cls(name, pulumi.ResourceOptions(parent=self))
        return self.components[key]
