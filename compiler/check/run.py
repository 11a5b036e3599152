"""Stage 5, check: run every checker on every compiled cluster and decide whether output may be written.

Checkers are independent functions listed in CHECKERS; a new check joins by appending itself
(see model.Checker). This module is the stage's edge: it reads the CRD directories and the
previously rendered tree, then hands plain data to the checkers.
"""

from __future__ import annotations

from pathlib import Path

from ..diagnostics import Diagnostic, tagged
from ..lower.graph import CompiledCluster
from .budgets import check_budgets
from .crds import CrdCatalog, build_catalog, read_crd_dir
from .dra_limits import check_dra_limits
from .driver_config import check_driver_configs
from .fabric_partitions import check_fabric_partitions
from .file_names import check_file_names
from .lws import check_leader_worker_set
from .metadata import check_metadata
from .model import Checker, CheckOptions, ClusterContext, Finding
from .nim_requests import check_nim_requests
from .objects import check_objects
from .operator_chart import check_operator_chart
from .report import to_diagnostic
from .selectors import check_selectors


def check_device_selectors(ctx: ClusterContext) -> list[Diagnostic]:
    """Every emitted and user-written CEL selector compiles, reads published attributes, matches a device."""
    return check_selectors(ctx.compiled, ctx.device_inventory())


CHECKERS: list[Checker] = [check_objects, check_metadata, check_dra_limits, check_driver_configs, check_device_selectors,
                           check_nim_requests, check_operator_chart, check_fabric_partitions,
                           check_leader_worker_set, check_file_names, check_budgets]


def check_cluster(ctx: ClusterContext, checkers: list[Checker] | None = None) -> list[Diagnostic]:
    out: set[Diagnostic] = set()
    for checker in checkers if checkers is not None else CHECKERS:
        rule = "output/" + getattr(checker, "__name__", "checks").removeprefix("check_").replace("_", "-")
        out.update(tagged([to_diagnostic(item) if isinstance(item, Finding) else item for item in checker(ctx)], rule))
    return sorted(out)


def cluster_catalog(compiled: CompiledCluster, fleet_root: Path, options: CheckOptions) -> CrdCatalog:
    """The cluster's own `spec.crds` directory first, then every --crds directory."""
    layers = []
    own = compiled.cluster.spec.crds
    if own:  # validation made sure it is a directory inside the fleet
        layers.append((own, read_crd_dir(fleet_root / own, own, within=fleet_root)))
    for directory in options.crds:
        layers.append((str(directory), read_crd_dir(directory, str(directory))))
    spec = compiled.cluster.spec
    versions = {group: version for group, version in (
        ("resource.nvidia.com", spec.dra_driver.version), ("nvidia.com", spec.gpu_operator.version),
        # Node Feature Discovery's CRDs, as vendored in the GPU Operator chart of that release (charts/node-feature-discovery)
        ("nfd.k8s-sigs.io", spec.gpu_operator.version),
        ("apps.nvidia.com", spec.nim_operator.version if spec.nim_operator else None)) if version}
    return build_catalog(layers, versions)
