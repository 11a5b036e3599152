"""The gate: what compiling, placing and checking a fleet found, and whether its output may be applied.

Every backend (the rendered tree, the Pulumi stacks, diff, plan, explain) receives the same
`CompiledFleet` from `compiler.pipeline.compile_fleet` and asks it the same question, so none of
them can apply what another would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostic, InfeasibleError, InputError
from ..lower.graph import CompiledCluster
from ..place import AllocationPlan
from ..validate.documents import Fleet


class OutputRejected(InfeasibleError):
    """Compiled output the API server or a driver would refuse: exit code 1, nothing is applied."""


@dataclass
class ClusterOutcome:
    """One cluster through plan, lower, place and check. `compiled` and `placement` are dropped when
    the caller asked for findings only (large fleets built in worker processes send back only these)."""

    name: str
    compiled: CompiledCluster | None = None  # None when sizing failed, or when not kept
    placement: AllocationPlan | None = None  # None when not placed (sizing failed, output refused) or not kept
    infeasible: list[Diagnostic] = field(default_factory=list)  # sizing findings, pods that cannot be placed
    rejected: list[Diagnostic] = field(default_factory=list)  # output the API server or the driver would refuse
    warnings: list[Diagnostic] = field(default_factory=list)
    unplaced: int = 0  # pods that cannot be placed
    objects: int = 0
    releases: int = 0
    applications: int = 0  # Argo CD Applications
    checked: int = 0  # objects the checks saw (the Argo CD objects included)
    paths: list[str] = field(default_factory=list)  # files written, when the caller wrote the cluster
    # for the incremental cache (CompileOptions.digests): the written files' digests, and how many objects
    # were judged as updates of a previous version (findings then depend on that version: not cached)
    digests: dict[str, str] | None = None
    updated: int = 0

    @property
    def passed(self) -> bool:
        return not (self.infeasible or self.rejected)


@dataclass
class CompiledFleet:
    fleet: Fleet
    clusters: dict[str, ClusterOutcome]
    warnings: list[Diagnostic]  # the fleet's and every cluster's, sorted, each once

    @property
    def compiled(self) -> dict[str, CompiledCluster]:
        """The clusters that compiled (whatever the checks and placement found), by name."""
        return {name: c.compiled for name, c in self.clusters.items() if c.compiled is not None}

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.clusters.values())

    def failure(self, what: str = "nothing was rendered") -> InputError | None:
        """The error that stops a backend, or None when the output may be applied: refused output
        first (OutputRejected), else sizing and placement findings (InfeasibleError); both exit 1.
        `what` says what the refusal means for the caller's output."""
        infeasible = [d for c in self.clusters.values() for d in c.infeasible]
        rejected = [d for c in self.clusters.values() for d in c.rejected]
        if rejected:
            return OutputRejected(sorted(set(infeasible + rejected + self.warnings)))
        if infeasible:
            unplaced = sum(c.unplaced for c in self.clusters.values())
            summary = [unplaced_summary(str(self.fleet.root), unplaced, what)] if unplaced else []
            return InfeasibleError(sorted(set(infeasible + self.warnings)) + summary)
        return None

    def raise_if_failed(self, what: str = "nothing was rendered") -> None:
        error = self.failure(what)
        if error is not None:
            raise error


def unplaced_summary(root: str, unplaced: int, what: str) -> Diagnostic:
    return Diagnostic(root, 0, "(plan)", f"{unplaced} pod(s) cannot be placed on the clusters' inventories, so {what}",
                      "`gpuc plan FLEET` shows every placement; fix the intents or the node pools, or accept it "
                      "(render --allow-infeasible, stack config gpuc:allowInfeasible)")
