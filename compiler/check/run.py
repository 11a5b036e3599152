"""Stage 5, check: run every checker on every compiled cluster and decide whether output may be written.

Checkers are independent functions listed in CHECKERS; a new check joins by appending itself
(see model.Checker). This module is the stage's edge: it reads the CRD directories and the
previously rendered tree, then hands plain data to the checkers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..diagnostics import Diagnostic, Findings, InfeasibleError
from ..lower.graph import CompiledCluster
from .crds import CrdCatalog, build_catalog, read_crd_dir
from .dra_limits import check_dra_limits
from .driver_config import check_driver_configs
from .metadata import check_metadata
from .model import CheckOptions, Checker, ClusterContext, Finding
from .objects import check_objects
from .previous import read_previous
from .report import to_diagnostic

CHECKERS: list[Checker] = [check_objects, check_metadata, check_dra_limits, check_driver_configs]


class OutputRejected(InfeasibleError):
    """Compiled output the API server or a driver would refuse: exit code 1, nothing is written."""


@dataclass
class CheckReport:
    findings: Findings = field(default_factory=Findings)
    objects: dict[str, int] = field(default_factory=dict)  # cluster -> objects checked

    @property
    def warnings(self) -> list[Diagnostic]:
        return self.findings.warnings


def check_cluster(ctx: ClusterContext, checkers: list[Checker] | None = None) -> list[Diagnostic]:
    out: set[Diagnostic] = set()
    for checker in checkers if checkers is not None else CHECKERS:
        for item in checker(ctx):
            out.add(to_diagnostic(item) if isinstance(item, Finding) else item)
    return sorted(out)


def cluster_catalog(compiled: CompiledCluster, fleet_root: Path, options: CheckOptions) -> CrdCatalog:
    """The cluster's own `spec.crds` directory first, then every --crds directory."""
    layers = []
    own = compiled.cluster.spec.crds
    if own:  # validation made sure it is a directory inside the fleet
        layers.append((own, read_crd_dir(fleet_root / own, own)))
    for directory in options.crds:
        layers.append((str(directory), read_crd_dir(directory, str(directory))))
    return build_catalog(layers)


def check_clusters(clusters: dict[str, CompiledCluster], fleet_root: Path, options: CheckOptions,
                   previous_root: Path | None = None) -> CheckReport:
    """Check every cluster; raises OutputRejected (exit 1) when any error is found, else returns warnings."""
    report = CheckReport()
    for name, compiled in clusters.items():
        previous = read_previous(previous_root / name) if previous_root is not None else {}
        ctx = ClusterContext(compiled, cluster_catalog(compiled, fleet_root, options), options, previous)
        report.findings.extend(check_cluster(ctx))
        report.objects[name] = len(ctx.objects)
    if report.findings.errors:
        raise OutputRejected(report.findings.all())
    return report
