"""The stack program's steps: read stack config, compile the stack's cluster, register it.

The stack name is the cluster name, so `pulumi stack select prod-east` cannot deploy staging's
objects. The cluster goes through the same gate as `gpuc render` (compiler.pipeline.compile_fleet):
input errors, output the API server or the driver would refuse, and pods that cannot be placed all
end as a `pulumi.RunError` carrying gpuc's diagnostics (file, line, field, hint), which Pulumi prints
without a Python traceback, before any resource is registered. The stack config has render's escape
hatches: `gpuc:allowInfeasible` (--allow-infeasible) and `gpuc:allowReplace` (--allow-replace, judged
against `gpuc:previous`, a rendered tree, as `gpuc validate --previous` does), render's `--state`:
`gpuc:state`, the export file(s) of the running cluster, and its CRD inputs:
`gpuc:crds` (--crds: a directory, or a JSON list of them) and `gpuc:requireCrds` (--require-crds).
`gpuc:charts: external` leaves the Helm releases to another tool that installs the charts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pulumi
import pulumi_kubernetes as k8s

from compiler.diagnostics import InfeasibleError, InputError, show_paths_from
from compiler.lower.graph import CompiledCluster
from compiler.pipeline import CheckOptions, ClusterState, CompileOptions, OutputRejected, compile_fleet, read_state

from .cluster import GpuCluster
from .components import UnknownComponent
from .helm import ChartNotFound
from .kinds import UnsupportedObject

CONFIG_NAMESPACE = "gpuc"
CHARTS_MODES = ("install", "external")  # gpuc:charts: the stack installs the charts, or another tool does


@dataclass(frozen=True)
class StackSettings:
    stack: str
    fleet: Path
    kubeconfig: pulumi.Output[str] | None  # a path or the file's content, kept secret in state
    context: str | None
    allow_infeasible: bool = False  # render --allow-infeasible: pods that cannot be placed are warnings
    allow_replace: bool = False  # render --allow-replace: accept replacing a NIMService (judged against `previous`)
    previous: Path | None = None  # a rendered tree (DIR/<cluster>/ inside) that updates are judged against
    state: tuple[Path, ...] = ()  # render --state: exports of the running cluster (its slices, claims, nodes)
    crds: tuple[Path, ...] = ()  # render --crds: CRD directories custom resources are checked against
    require_crds: bool = False  # render --require-crds: a custom resource kind with no CRD is an error
    charts: bool = True  # gpuc:charts install (default) or external: another tool installs the Helm releases

    @classmethod
    def from_config(cls, project_root: Path) -> StackSettings:
        """`gpuc:fleet`, `gpuc:previous` and `gpuc:crds` are relative to the project root (where Pulumi.yaml is)."""
        config = pulumi.Config(CONFIG_NAMESPACE)
        previous = config.get("previous")
        charts = config.get("charts") or "install"
        if charts not in CHARTS_MODES:
            raise pulumi.RunError(f"gpuc: stack '{pulumi.get_stack()}': gpuc:charts is '{charts}'; set it to install (the stack "
                                  "installs the Helm releases) or external (another tool installs the charts)")
        return cls(stack=pulumi.get_stack(), fleet=project_root / config.require("fleet"),
                   kubeconfig=config.get_secret("kubeconfig"), context=config.get("context"),
                   allow_infeasible=bool(config.get_bool("allowInfeasible")), allow_replace=bool(config.get_bool("allowReplace")),
                   previous=project_root / previous if previous else None,
                   state=tuple(project_root / name for name in _state_files(config)),
                   crds=tuple(project_root / d for d in _directories(config.get("crds"))),
                   require_crds=bool(config.get_bool("requireCrds")), charts=charts == "install")


def _state_files(config: pulumi.Config) -> list[str]:
    """`gpuc:state`: one export file, or a list of them (`pulumi config set --path 'gpuc:state[0]' state.yaml`)."""
    raw = config.get("state")
    if raw is None:
        return []
    value = config.get_object("state") if raw.lstrip().startswith("[") else raw
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise pulumi.RunError(f"gpuc: stack '{pulumi.get_stack()}': gpuc:state must be a file name or a list of them "
                          f"(kubectl exports of the running cluster, relative to the project root), got {raw!r}")


def _directories(raw: str | None) -> list[str]:
    """`gpuc:crds`: one directory, or a JSON list of them (`pulumi config set --path 'gpuc:crds[0]' DIR` writes one)."""
    if not raw:
        return []
    if raw.lstrip().startswith("["):
        try:
            listed = json.loads(raw)
        except json.JSONDecodeError:
            listed = None
        if not (isinstance(listed, list) and all(isinstance(d, str) for d in listed)):
            raise pulumi.RunError(f"gpuc: gpuc:crds is neither a directory nor a list of directories: {raw}; "
                                  "set it to e.g. crds/nim-operator, or [\"crds/a\", \"crds/b\"]")
        return listed
    return [raw]


def _fail(settings: StackSettings, exc: InputError) -> NoReturn:
    if isinstance(exc, OutputRejected):
        what = "compiles to output the cluster would refuse, so nothing was registered"
    elif isinstance(exc, InfeasibleError):
        what = "cannot be placed on the cluster, so nothing was registered"
    else:
        what = "has input errors"
    lines = [f"gpuc: fleet {settings.fleet} {what} (stack '{settings.stack}'):"] + [d.render() for d in exc.diagnostics]
    raise pulumi.RunError("\n".join(lines)) from None


def compile_stack(settings: StackSettings) -> CompiledCluster:
    """Compile, place and check the cluster named like the stack, logging warnings; RunError whenever
    `gpuc render` would refuse it (with the same escape hatches)."""
    if settings.previous is not None and not settings.previous.is_dir():
        raise pulumi.RunError(f"gpuc: stack '{settings.stack}': gpuc:previous {settings.previous} is not a directory; "
                              "set it to the rendered tree (e.g. rendered) or remove it")
    show_paths_from(settings.fleet)  # findings name files as seen from where `pulumi up` runs
    missing = [d for d in settings.crds if not d.is_dir()]
    if missing:
        raise pulumi.RunError(f"gpuc: stack '{settings.stack}': gpuc:crds {missing[0]} is not a directory; "
                              "set it to a directory of CRD YAMLs (relative to the project root) or remove it")
    checks = CheckOptions(settings.crds, settings.require_crds, settings.allow_replace)
    try:
        state = _read_state(settings)
        options = CompileOptions(only=settings.stack, checks=checks, previous=settings.previous,
                                 allow_infeasible=settings.allow_infeasible, missing_ok=True, state=state)
        compilation = compile_fleet(settings.fleet, options)
    except InputError as exc:
        _fail(settings, exc)
    if settings.stack not in compilation.clusters:
        raise pulumi.RunError(
            f"gpuc: stack '{settings.stack}' deploys the cluster of that name, but fleet {settings.fleet} has no cluster "
            f"'{settings.stack}' (clusters: {', '.join(sorted(compilation.fleet.clusters))}); select one with "
            "`pulumi stack select <cluster>`")
    failure = compilation.failure("the stack registers nothing")
    if failure is not None:
        _fail(settings, failure)
    for warning in compilation.warnings:
        pulumi.log.warn(warning.render())
    compiled = compilation.clusters[settings.stack].compiled
    assert compiled is not None  # it passed the gate
    return compiled


def _read_state(settings: StackSettings) -> ClusterState | None:
    """The running cluster of `gpuc:state`, read as `--state` reads it (its warnings become Pulumi warnings)."""
    if not settings.state:
        return None
    state = read_state([str(p) for p in settings.state], "gpuc:state")
    for warning in state.warnings:
        pulumi.log.warn(warning.render())
    return state


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
        cluster = GpuCluster(compiled, pulumi.ResourceOptions(providers=[provider]), chart_root=project_root, charts=settings.charts)
    except (UnsupportedObject, UnknownComponent, ChartNotFound) as exc:
        raise pulumi.RunError(f"gpuc: stack '{settings.stack}': {exc}") from None
    pulumi.export("cluster", compiled.name)
    pulumi.export("nodeLabels", compiled.node_labels)  # for pools without nodeNames: set them in the node provisioner
    return cluster
