"""The whole pipeline for `render` and `validate`: per cluster plan -> lower -> emit -> check.

Clusters are independent once the fleet is validated, so large fleets are built in parallel: worker
processes are forked as soon as every cluster is resolved and inherit the validated fleet instead of
receiving it; the workload rules finish in this process meanwhile, and a fleet that fails them has its
builds discarded unread. When rendering, each worker writes its clusters' files into the render's
staging directory itself and returns only file names and findings, so writing overlaps compiling and
no file text crosses back to the parent. Small fleets stay in one process, where forking would cost
more than it saves. Results come back in cluster order, so output never depends on
which worker finished first.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .cel.engine import environment
from .check.builtin import SchemasUnavailable, builtin_kinds
from .check.model import CheckOptions, ClusterContext, value_at
from .check.previous import PreviousTree
from .check.run import OutputRejected, check_cluster, cluster_catalog
from .diagnostics import Diagnostic, InfeasibleError, InputError
from .facts.platform import parse_kubernetes_version
from .emit.staging import stage_cluster, unchanged_files
from .emit.tree import cluster_files
from .load.fleet import FleetFiles
from .load.parallel import can_fork, cores
from .load.yaml_source import SourceDoc
from .pipeline import compile_cluster, validate_clusters
from .place.allocator import plan_cluster_allocation
from .place.inventory.bulk import bulk_objects
from .validate.documents import DocumentChecks, Fleet
from .validate.resolved import ResolvedCluster
from .validate.rules import check_intents

PARALLEL_MIN_WORKLOADS = 2_000  # below this a fork costs more than it saves


@dataclass
class ClusterBuild:
    name: str
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text; emptied once written to the staging directory
    paths: list[str] = field(default_factory=list)  # the relative paths of `files`, sorted (kept when the texts are dropped)
    unchanged: set[str] = field(default_factory=set)  # files byte-identical to the previous render
    objects: int = 0
    releases: int = 0
    checked: int = 0  # objects the checks saw (Argo CD Applications included)
    warnings: list[Diagnostic] = field(default_factory=list)
    infeasible: list[Diagnostic] = field(default_factory=list)  # sizing or placement findings (exit 1)
    rejected: list[Diagnostic] = field(default_factory=list)  # check findings: the API server would refuse output
    unplaced: int = 0  # pods the allocator could not place


@dataclass
class FleetBuild:
    fleet: Fleet
    clusters: list[ClusterBuild]
    warnings: list[Diagnostic]

    def raise_if_failed(self, rendering: bool = True) -> None:
        """Infeasible plans and refused output are findings (exit 1); nothing is written."""
        infeasible = [d for c in self.clusters for d in c.infeasible]
        rejected = [d for c in self.clusters for d in c.rejected]
        if rejected:
            raise OutputRejected(sorted(set(infeasible + rejected + self.warnings)))
        unplaced = sum(c.unplaced for c in self.clusters)
        if infeasible:
            summary = ([_unplaced_summary(str(self.fleet.root), unplaced, rendering)] if unplaced else [])
            raise InfeasibleError(sorted(set(infeasible + self.warnings)) + summary)


def _unplaced_summary(root: str, unplaced: int, rendering: bool) -> Diagnostic:
    if rendering:
        return Diagnostic(root, 0, "(plan)", f"{unplaced} pod(s) cannot be placed, so nothing was rendered",
                          "`gpuc plan FLEET` shows every placement; fix the intents, or pass --allow-infeasible to render anyway")
    return Diagnostic(root, 0, "(plan)", f"{unplaced} pod(s) cannot be placed on the clusters' synthesized inventories; "
                      "`gpuc render` would refuse this fleet", "`gpuc plan FLEET` shows every placement; fix the intents or the node pools")


@dataclass(frozen=True)
class _Job:
    fleet: Fleet
    clusters: dict[str, ResolvedCluster]
    options: CheckOptions
    previous_root: Path | None
    placement: str  # "gate": unplaceable pods fail the build; "warn": they are warnings; "skip": no planning
    staging: Path | None  # render: write each passing cluster to staging/new/<cluster> (emit.staging.stage_cluster)


_JOB: _Job | None = None  # set before forking; the workers inherit it


def build_cluster(name: str) -> ClusterBuild:
    """Runs inside build_fleet's bulk_objects scope: in process, or in a worker forked within it."""
    job = _JOB
    assert job is not None
    cluster = job.clusters[name]
    compiled, findings = compile_cluster(cluster, job.fleet)
    result = ClusterBuild(name, warnings=findings.warnings)
    if compiled is None:
        result.infeasible = findings.errors
        return result
    result.files = cluster_files(compiled)
    result.paths = sorted(result.files)
    result.objects, result.releases = len(compiled.objects), len(compiled.releases)
    previous_dir = job.previous_root / name if job.previous_root is not None else None
    if previous_dir is not None:
        result.unchanged = unchanged_files(previous_dir, result.files)
    previous = PreviousTree(previous_dir, result.unchanged)
    ctx = ClusterContext(compiled, cluster_catalog(compiled, job.fleet.root, job.options), job.options, previous, result.files)
    result.checked = len(ctx.objects)
    for d in check_cluster(ctx):
        (result.rejected if d.severity == "error" else result.warnings).append(d)
    if job.placement != "skip" and not result.rejected:
        plan = plan_cluster_allocation(compiled, ctx.device_inventory(), detail=False)  # the gate needs only the failures
        problems = plan.diagnostics()
        result.unplaced = len(plan.unplaced)
        if job.placement == "gate":
            result.infeasible.extend(problems)
        else:
            result.warnings.extend(Diagnostic(d.file, d.line, d.path, d.message, d.hint, "warning") for d in problems)
    if job.staging is not None and job.previous_root is not None and not (result.rejected or result.infeasible):
        stage_cluster(job.previous_root, job.staging, name, result.files, result.unchanged)
        result.files = {}
    return result


def read_along(clusters: list[SourceDoc]) -> DocumentChecks:
    """load_fleet's `meanwhile` for a build: while the workers parse, warm the caches the build workers
    will inherit, then check each workload document as it arrives (validate.documents.DocumentChecks)."""
    warm_caches(clusters)
    return DocumentChecks()


def warm_caches(clusters: list[SourceDoc]) -> None:
    """Build what every cluster build needs once, before the build workers are forked (this runs while
    the workload files parse): cel-python's parser and the built-in schemas of the Kubernetes versions
    the cluster files name. Each worker would otherwise spend 0.15 s on them. The cluster documents are
    not validated yet: only versions gpuc supports are warmed, anything else is validation's to report."""
    environment()
    for doc in clusters:
        version = value_at(doc.value, ("spec", "kubernetesVersion"))
        with contextlib.suppress(ValueError, SchemasUnavailable, OSError):
            if isinstance(version, str):
                builtin_kinds(parse_kubernetes_version(version).kubernetes)


def _workers(fleet: Fleet, clusters: list[str], jobs: int | None) -> int:
    if jobs is not None:
        return max(1, jobs)
    size = sum(len(fleet.workloads_on(c)) for c in clusters)
    if len(clusters) < 2 or size < PARALLEL_MIN_WORKLOADS or not can_fork():
        return 1
    return min(len(clusters), cores())


def build_fleet(source: str | os.PathLike[str] | FleetFiles, only: str | None = None, options: CheckOptions = CheckOptions(),
                previous_root: Path | None = None, jobs: int | None = None, placement: str = "gate",
                progress: Callable[[int, int], None] | None = None, staging: Path | None = None) -> FleetBuild:
    """Validate the fleet (a directory, or its files already loaded), then build every cluster (or just
    `only`); raises InputError for bad input.

    `placement`: "gate" plans every pod on the cluster's inventory and fails on unplaceable pods (render),
    "warn" reports them as warnings (render --allow-infeasible), "skip" does not plan. `progress` is
    told (clusters built, clusters) as each cluster finishes. With `staging` (from emit.staging.stage_tree
    in `previous_root`, the output directory), every cluster that passes is written there and its
    ClusterBuild keeps only `paths`; the caller swaps the staged tree in.
    """
    # One scope without the cyclic collector from validation to the last cluster: between the two, a
    # full collection of the validated fleet's millions of objects would run just before forking.
    with bulk_objects():
        return _build_fleet(source, only, options, previous_root, jobs, placement, progress, staging)


def _build_fleet(source: str | os.PathLike[str] | FleetFiles, only: str | None, options: CheckOptions, previous_root: Path | None,
                 jobs: int | None, placement: str, progress: Callable[[int, int], None] | None,
                 staging: Path | None) -> FleetBuild:
    global _JOB
    fleet, resolved, findings = validate_clusters(source, meanwhile=read_along, jobs=jobs)
    if only is not None and only not in resolved:
        check_intents(fleet, resolved, findings)  # mistakes in the fleet come first, as in validate_fleet
        findings.raise_if_errors()
        raise InputError([Diagnostic(str(fleet.root), 0, "--cluster", f"no cluster named '{only}' in the fleet",
                                     f"clusters: {', '.join(resolved)}")])
    names = [n for n in resolved if only is None or n == only]
    _JOB = _Job(fleet, resolved, options, previous_root, placement, staging)
    try:
        workers = _workers(fleet, names, jobs)
        results: list[ClusterBuild] = []
        with contextlib.ExitStack() as stack:
            if workers == 1:
                built: Iterable[ClusterBuild] = map(build_cluster, names)
            else:
                pool = stack.enter_context(multiprocessing.get_context("fork").Pool(workers))
                built = pool.imap(build_cluster, names, chunksize=1)  # in cluster order, whichever worker finishes first
            # The workload rules run here, while forked workers already build (they only add findings). If
            # they fail, the builds are thrown away unread: the pool is terminated, staging is discarded.
            check_intents(fleet, resolved, findings)
            findings.raise_if_errors()
            for result in built:
                results.append(result)
                if progress is not None:
                    progress(len(results), len(names))
    finally:
        _JOB = None
    all_warnings = sorted(set(findings.warnings) | {w for r in results for w in r.warnings})
    return FleetBuild(fleet, results, all_warnings)
