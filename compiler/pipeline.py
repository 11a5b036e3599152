"""The compiler pipeline: load -> validate -> plan -> lower (-> check -> emit, in the backends).

`compile_fleet` is the one entry point every backend uses (rendered tree, Pulumi stacks, diff,
explain), so they all see the same compiled objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .diagnostics import Diagnostic, Findings, InfeasibleError, InputError
from .load.fleet import load_fleet
from .lower import lower_cluster
from .lower.graph import CompiledCluster
from .plan import plan_cluster
from .validate.documents import Fleet, build_fleet
from .validate.resolved import ResolvedCluster
from .validate.rules import check_fleet


@dataclass
class Compilation:
    fleet: Fleet
    clusters: dict[str, CompiledCluster]
    warnings: list[Diagnostic] = field(default_factory=list)


def validate_fleet(root: str | os.PathLike[str]) -> tuple[Fleet, dict[str, ResolvedCluster], list[Diagnostic]]:
    """Load and validate; raises InputError (exit 2) with every finding."""
    findings = Findings()
    files = load_fleet(root)
    fleet = build_fleet(files, findings)
    findings.raise_if_errors()
    resolved = check_fleet(fleet, findings)
    findings.raise_if_errors()
    return fleet, resolved, findings.warnings


def compile_fleet(root: str | os.PathLike[str], only: str | None = None) -> Compilation:
    """Compile every cluster of the fleet (or just `only`); raises InputError or InfeasibleError."""
    fleet, resolved, warnings = validate_fleet(root)
    if only is not None and only not in resolved:
        raise InputError([Diagnostic(str(root), 0, "--cluster", f"no cluster named '{only}' in the fleet",
                                     f"clusters: {', '.join(resolved)}")])
    findings = Findings()
    findings.extend(warnings)
    compiled = {}
    for name, cluster in resolved.items():
        if only is not None and name != only:
            continue
        plan = plan_cluster(cluster, fleet, findings)
        compiled[name] = lower_cluster(plan, fleet) if not findings.errors else None
    if findings.errors:
        raise InfeasibleError(findings.all())
    return Compilation(fleet, {k: v for k, v in compiled.items() if v is not None}, findings.warnings)
