"""The stack program's steps: read stack config, compile the stack's cluster, register it.

The stack name is the cluster name, so `pulumi stack select prod-east` cannot deploy staging's
objects. Anything wrong with the input ends as a `pulumi.RunError` carrying gpuc's diagnostics
(file, line, field, hint), which Pulumi prints without a Python traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Optional

import pulumi
import pulumi_kubernetes as k8s

from compiler.diagnostics import InfeasibleError, InputError
from compiler.lower.graph import CompiledCluster
from compiler.pipeline import compile_fleet, validate_fleet

from .cluster import GpuCluster
from .components import UnknownComponent
from .kinds import UnsupportedObject

CONFIG_NAMESPACE = "gpuc"


@dataclass(frozen=True)
class StackSettings:
    stack: str
    fleet: Path
    kubeconfig: Optional[pulumi.Output[str]]  # a path or the file's content, kept secret in state
    context: Optional[str]

    @classmethod
    def from_config(cls, project_root: Path) -> "StackSettings":
        """`gpuc:fleet` is relative to the project root (where Pulumi.yaml is), like every path in it."""
        config = pulumi.Config(CONFIG_NAMESPACE)
        return cls(stack=pulumi.get_stack(), fleet=project_root / config.require("fleet"),
                   kubeconfig=config.get_secret("kubeconfig"), context=config.get("context"))


def _fail(settings: StackSettings, exc: InputError) -> NoReturn:
    what = "cannot be placed" if isinstance(exc, InfeasibleError) else "has input errors"
    lines = [f"gpuc: fleet {settings.fleet} {what} (stack '{settings.stack}'):"] + [d.render() for d in exc.diagnostics]
    raise pulumi.RunError("\n".join(lines)) from None


def compile_stack(settings: StackSettings) -> CompiledCluster:
    """Compile the cluster named like the stack, logging warnings; RunError on any finding."""
    try:
        _, clusters, _ = validate_fleet(settings.fleet)
    except InputError as exc:
        _fail(settings, exc)
    if settings.stack not in clusters:
        raise pulumi.RunError(
            f"gpuc: stack '{settings.stack}' deploys the cluster of that name, but fleet {settings.fleet} has no cluster "
            f"'{settings.stack}' (clusters: {', '.join(sorted(clusters))}); select one with `pulumi stack select <cluster>`")
    try:
        compilation = compile_fleet(settings.fleet, only=settings.stack)
    except InputError as exc:
        _fail(settings, exc)
    for warning in compilation.warnings:
        pulumi.log.warn(warning.render())
    return compilation.clusters[settings.stack]


def cluster_provider(settings: StackSettings) -> k8s.Provider:
    """One explicit provider per stack, so every resource targets the cluster the config names.

    Without gpuc:kubeconfig/gpuc:context it uses the ambient kubeconfig's current context, like the
    default provider would; being explicit from the start means adding them later updates the
    provider instead of re-homing every resource.
    """
    if settings.kubeconfig is None and settings.context is None:
        pulumi.log.warn(f"gpuc:kubeconfig and gpuc:context are not set: stack '{settings.stack}' deploys to the "
                        "current context of the ambient kubeconfig (KUBECONFIG or ~/.kube/config)")
    return k8s.Provider(settings.stack, kubeconfig=settings.kubeconfig, context=settings.context,
                        enable_server_side_apply=True)  # the Patch resources need server-side apply


def deploy(project_root: Path) -> GpuCluster:
    """The whole program: `stacks/__main__.py` calls this and nothing else."""
    settings = StackSettings.from_config(project_root)
    compiled = compile_stack(settings)
    provider = cluster_provider(settings)
    try:
        cluster = GpuCluster(compiled, pulumi.ResourceOptions(providers=[provider]))
    except (UnsupportedObject, UnknownComponent) as exc:
        raise pulumi.RunError(f"gpuc: stack '{settings.stack}': {exc}") from None
    pulumi.export("cluster", compiled.name)
    pulumi.export("nodeLabels", compiled.node_labels)  # for pools without nodeNames: set them in the node provisioner
    return cluster
