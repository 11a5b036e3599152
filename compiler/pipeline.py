"""The compiler pipeline: load -> validate -> plan -> lower (-> check -> emit, in the backends).

`compile_fleet` is the one entry point every backend uses (rendered tree, Pulumi stacks, diff,
explain), so they all see the same compiled objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .diagnostics import Diagnostic, Findings, InfeasibleError, InputError
from .load.fleet import FleetFiles, Meanwhile, load_fleet
from .lower import lower_cluster
from .lower.graph import CompiledCluster
from .plan import plan_cluster
from .validate.documents import Fleet, build_fleet
from .validate.resolved import ResolvedCluster
from .validate.rules import check_intents, resolve_clusters


@dataclass
class Compilation:
    fleet: Fleet
    clusters: dict[str, CompiledCluster]
    warnings: list[Diagnostic] = field(default_factory=list)
    infeasible: dict[str, list[Diagnostic]] = field(default_factory=dict)  # only when compiled leniently


def validate_fleet(source: str | os.PathLike[str] | FleetFiles, meanwhile: Meanwhile | None = None,
                   ) -> tuple[Fleet, dict[str, ResolvedCluster], list[Diagnostic]]:
    """Load (unless `source` is already loaded) and validate; raises InputError (exit 2) with every
    finding. `meanwhile`: see load_fleet."""
    fleet, resolved, findings = validate_clusters(source, meanwhile)
    check_intents(fleet, resolved, findings)
    findings.raise_if_errors()
    return fleet, resolved, findings.warnings


def validate_clusters(source: str | os.PathLike[str] | FleetFiles, meanwhile: Meanwhile | None = None,
                      jobs: int | None = None) -> tuple[Fleet, dict[str, ResolvedCluster], Findings]:
    """The first part of validate_fleet: every document checked and every cluster resolved, which is all
    that compiling a cluster needs. The workload rules (validate.rules.check_intents) are still to run,
    and they may add errors to the findings. Raises InputError when what is here already fails."""
    findings = Findings()
    files = source if isinstance(source, FleetFiles) else load_fleet(source, meanwhile, jobs)
    findings.extend(files.warnings)
    fleet = build_fleet(files, findings)
    findings.raise_if_errors()
    resolved = resolve_clusters(fleet, findings)
    if findings.errors:
        check_intents(fleet, resolved, findings)  # every mistake in one run
        findings.raise_if_errors()
    return fleet, resolved, findings


def compile_cluster(cluster: ResolvedCluster, fleet: Fleet) -> tuple[CompiledCluster | None, Findings]:
    """Plan and lower one cluster; the findings say why it could not be compiled, if it could not."""
    findings = Findings()
    plan = plan_cluster(cluster, fleet, findings)
    return (None if findings.errors else lower_cluster(plan, fleet)), findings


def compile_fleet(root: str | os.PathLike[str], only: str | None = None, *, lenient: bool = False,
                  missing_ok: bool = False) -> Compilation:
    """Compile every cluster of the fleet (or just `only`).

    Raises InputError for bad input. A cluster whose workloads cannot be satisfied raises
    InfeasibleError, unless `lenient`: then it is left out and its findings are in `infeasible`.
    With `missing_ok`, a fleet without `only` compiles to no cluster (a diff reports it removed or added).
    """
    fleet, resolved, warnings = validate_fleet(root)
    if only is not None and only not in resolved and not missing_ok:
        raise InputError([Diagnostic(str(root), 0, "--cluster", f"no cluster named '{only}' in the fleet",
                                     f"clusters: {', '.join(resolved)}")])
    compilation = Compilation(fleet, {}, list(warnings))
    errors: list[Diagnostic] = []
    for name, cluster in resolved.items():
        if only is not None and name != only:
            continue
        compiled, findings = compile_cluster(cluster, fleet)
        compilation.warnings.extend(findings.warnings)
        if compiled is None:
            compilation.infeasible[name] = findings.errors
            errors.extend(findings.errors)
        else:
            compilation.clusters[name] = compiled
    compilation.warnings = sorted(set(compilation.warnings))
    if errors and not lenient:
        raise InfeasibleError(sorted(set(errors + compilation.warnings)))
    return compilation
