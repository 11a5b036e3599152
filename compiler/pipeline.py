"""The one entry point every backend uses: load -> validate -> plan -> lower -> place -> check.

`compile_fleet` returns a `CompiledFleet` (check.gate): per cluster the compiled objects, where every
pod goes, and what the output checks and the placement found. The rendered tree, the Pulumi stacks,
`gpuc diff`, `plan`, `explain` and `validate` all take it from here and ask it the same question
(`CompiledFleet.failure`), so no backend applies what another refuses; `render` adds only the writing.
How the work is spread over processes is the runner's business.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .cache.keys import digest
from .cache.plan import BuildPlan, Settings, safe_plan
from .cache.store import CacheStore
from .check.budgets import budget_use
from .check.gate import ClusterOutcome, CompiledFleet, OutputRejected
from .check.model import NO_PREVIOUS, CheckOptions, ClusterContext, PreviousObjects
from .check.placement import check_placement
from .check.run import check_cluster, cluster_catalog
from .check.status import Finding, StatusReport, cluster_status
from .diagnostics import Diagnostic, Findings, InputError, tagged
from .emit.diff.compare import ClusterDiff, FleetDiff, compare
from .emit.previous import PreviousTree
from .emit.tree import cluster_files
from .load.fleet import FleetFiles, load_fleet
from .load.git import materialize
from .load.state import ClusterState
from .load.state import read_state as read_state  # the Pulumi program reads gpuc:state through the pipeline
from .load.yaml_source import SourceDoc
from .lower import lower_cluster
from .lower.graph import CompiledCluster
from .place import NO_USE, AllocationPlan, ClusterUse, Inventory, Progress, place_cluster, running_inventory, synthesize_for, with_headroom
from .place.inventory import synthesize
from .plan import plan_cluster
from .runner import OVERLAP_MIN_OBJECTS, LoadedFleet, build_workers, load, mapped, overlapped, without_cyclic_gc
from .validate import partial
from .validate.documents import CheckedDocument, Fleet, build_fleet
from .validate.resolution import resolve_clusters
from .validate.resolved import ResolvedCluster
from .validate.rules import check_intents
from .validate.secrets import redacted
from .validate.state_models import models_from_state, provider_from_state

# Called in the process that built a cluster that passed every check, with its rendered files and
# the files byte-identical to the previous tree's (`render` stages them: emit.staging.stage_cluster).
Write = Callable[[str, dict[str, str], set[str]], None]


@dataclass(frozen=True)
class CompileOptions:
    only: str | None = None  # compile just this cluster
    checks: CheckOptions = CheckOptions()
    previous: Path | None = None  # a previous render's root: updates are judged against DIR/<cluster>
    allow_infeasible: bool = False  # pods that cannot be placed are warnings, not a failure
    detail: bool = False  # record every placed pod's devices and each pool's use (plan, diff, reports)
    # the running cluster (exports or a live read): its ResourceSlices instead of synthesized ones, and the
    # devices its allocated claims hold; it describes one cluster
    state: ClusterState | None = None
    keep: bool = True  # keep compiled objects and placements (False: findings only; large fleets build in workers)
    missing_ok: bool = False  # `only` may name no cluster of the fleet (a diff side without it)
    jobs: int | None = None  # worker processes (None: one per core for large fleets)
    # compile only these clusters, and run the per-cluster rules only for them (an incremental build: the
    # others come from the cache); warnings are then only theirs and the fleet's own
    subset: frozenset[str] | None = None
    digests: bool = False  # record each written file's digest and the updates judged (ClusterOutcome.digests)


def validate_clusters(source: str | os.PathLike[str] | FleetFiles,
                      checked_early: Callable[[SourceDoc], CheckedDocument | None] | None = None,
                      state: ClusterState | None = None, only: str | None = None) -> tuple[Fleet, dict[str, ResolvedCluster], Findings]:
    """Every document checked and every cluster resolved, which is all that compiling a cluster needs. When
    something failed (the findings hold errors), the fleet returned is what the rest can still be compiled from
    (validate.partial) and every rule has run on it; otherwise the workload rules (validate.rules.check_intents)
    are still to run and may add errors. `only`: the cluster `state` describes."""
    findings = Findings()
    files = source if isinstance(source, FleetFiles) else load_fleet(source)
    findings.extend(files.warnings)
    fleet = build_fleet(files, findings, checked_early)
    if findings.errors:  # documents that did not validate: the clusters they concern are set aside, not the fleet
        clusters, namespaces = partial.from_documents(fleet.unvalidated)
        fleet = partial.without(fleet, clusters, namespaces=namespaces)
    start = len(findings)
    resolved = resolve_clusters(fleet, findings, models_from_state(state), {only: provider_from_state(state)} if only else {})
    findings.tag_since(start, "cluster")
    if findings.errors:
        check_intents(fleet, resolved, findings)  # every mistake in one run
    return fleet, resolved, findings


def validate_fleet(source: str | os.PathLike[str] | FleetFiles) -> tuple[Fleet, dict[str, ResolvedCluster], list[Diagnostic]]:
    """Load and validate, without compiling; raises InputError (exit 2) with every finding."""
    fleet, resolved, findings = validate_clusters(source)
    if not findings.errors:
        check_intents(fleet, resolved, findings)
    findings.raise_if_errors()
    return fleet, resolved, findings.warnings


def compile_cluster(cluster: ResolvedCluster, fleet: Fleet) -> tuple[CompiledCluster | None, Findings]:
    """Plan and lower one cluster; the findings say why it could not be compiled, if it could not."""
    findings = Findings()
    plan = plan_cluster(cluster, fleet, findings)
    findings.tag_since(0, "sizing")
    return (None if findings.errors else lower_cluster(plan, fleet)), findings


@dataclass
class _Job:
    """What building one cluster needs; forked workers inherit it."""

    fleet: Fleet
    clusters: dict[str, ResolvedCluster]
    options: CompileOptions
    write: Write | None
    progress: Callable[[str], Progress | None] | None = None
    in_process: bool = True  # clusters are built here, one after another (not in forked workers)

    def inventory(self, compiled: CompiledCluster) -> tuple[Inventory, ClusterUse]:
        state = self.options.state
        return running_inventory(compiled, state) if state is not None else (synthesize_for(compiled), NO_USE)

    def previous(self, name: str, files: dict[str, str] | None) -> PreviousTree | None:
        root = self.options.previous
        return PreviousTree(root / name, files) if root is not None else None

    def build(self, name: str) -> ClusterOutcome:
        options = self.options
        compiled, findings = compile_cluster(self.clusters[name], self.fleet)
        outcome = ClusterOutcome(name, warnings=findings.warnings)
        if compiled is None:
            outcome.infeasible = findings.errors
            return outcome
        outcome.objects, outcome.releases = len(compiled.objects), len(compiled.releases)
        outcome.applications = sum(1 for o in compiled.gitops if not o.patch)
        files = cluster_files(compiled) if self.write is not None or options.previous is not None else None
        tree = self.previous(name, files)
        previous: PreviousObjects = tree if tree is not None else NO_PREVIOUS
        inventory, use = self.inventory(compiled)
        # a staged change's step is checked against the cluster as intended: what it holds back is not wrong, only later
        checked_on = inventory if compiled.cluster.transition is None or options.state is not None else \
            synthesize(compiled.cluster.as_intended(), compiled.driver_values, compiled.node_labels)
        ctx = ClusterContext(compiled, cluster_catalog(compiled, self.fleet.root, options.checks), options.checks,
                             previous, checked_on)
        outcome.checked = len(ctx.objects)
        progress = self.progress(name) if self.progress is not None else None

        def place() -> AllocationPlan:
            return place_cluster(compiled, inventory, progress, detail=options.detail, use=use)

        # A large cluster built in this process checks its output in a fork while its pods are placed here
        # (two independent halves of the work). Pods are placed even when the checks refuse the output: what
        # does not fit, and what works on one node only, are findings of the same run, not of the next one.
        overlap = self.in_process and len(compiled.objects) >= OVERLAP_MIN_OBJECTS
        found, placement = overlapped(lambda: check_cluster(ctx), place if overlap else lambda: None, overlap)
        for d in found:
            (outcome.rejected if d.severity == "error" else outcome.warnings).append(d)
        if placement is None:
            placement = place()
        if options.detail:  # what is left: per pool, and per team budget
            placement = dataclasses.replace(with_headroom(compiled, placement, live=options.state is not None),
                                            budgets=tuple(budget_use(compiled)))
        outcome.unplaced = len(placement.unplaced)
        outcome.rejected.extend(tagged(check_placement(compiled, placement), "placement"))  # what works on one node only
        problems = tagged(placement.diagnostics(), "placement")
        step = compiled.cluster.transition
        if step is not None:  # a staged change's step: pods that wait for a later step are what the plan says
            outcome.warnings.extend(dataclasses.replace(
                d, message=f"(step {step.step} of {step.steps}: {step.change}) {d.message}", severity="warning",
                hint="this step holds GPUs back; `gpuc upgrade` says which step serves them again") for d in problems)
        elif options.allow_infeasible:
            outcome.warnings.extend(dataclasses.replace(d, severity="warning") for d in problems)
        else:
            outcome.infeasible.extend(problems)
        if outcome.rejected and not options.detail:
            placement = None  # refused output is never applied: no backend reads where its pods would go
        if self.write is not None and files is not None and outcome.passed:
            self.write(name, files, tree.unchanged if tree is not None else set())
            outcome.paths = sorted(files)
        if options.digests and files is not None:
            outcome.digests = {rel: digest(text.encode("utf-8")) for rel, text in files.items()}
            outcome.updated = sum(1 for rel in files if tree is not None and rel in tree.names and rel not in tree.unchanged)
        if options.keep:
            outcome.compiled, outcome.placement = compiled, placement
        return outcome


def compile_fleet(source: str | os.PathLike[str] | LoadedFleet, options: CompileOptions = CompileOptions(), write: Write | None = None,
                  progress: Callable[[str], Progress | None] | None = None,
                  built: Callable[[int, int], None] | None = None) -> CompiledFleet:
    """Load, validate and compile every cluster (or `options.only`), place its pods and check its
    output. Raises InputError for bad input (exit 2); what the clusters cannot satisfy or would refuse
    is in the result (`CompiledFleet.failure`). `write` is called for every cluster that passes (see
    Write); `progress` gives a pod-placement progress callback per cluster, `built` is told (clusters
    built, clusters) as each cluster finishes. `source` is a fleet directory, or one runner.load read."""
    with without_cyclic_gc():
        loaded = source if isinstance(source, LoadedFleet) else load(source, options.jobs)
        fleet, resolved, findings = validate_clusters(loaded.files, loaded.checked_early, options.state, options.only)
        only = options.only
        if findings.errors:
            raise InputError(_one_pass(fleet, resolved, findings, options))
        if only is not None and only not in resolved and not options.missing_ok:
            check_intents(fleet, resolved, findings)  # mistakes in the fleet come first
            if findings.errors:
                raise InputError(_one_pass(fleet, resolved, findings, options))
            raise InputError([Diagnostic(str(fleet.root), 0, "--cluster", f"no cluster named '{only}' in the fleet",
                                         f"clusters: {', '.join(resolved)}")])
        names = _names(resolved, options)
        if options.state is not None and len(names) != 1:
            raise InputError([Diagnostic(options.state.display, 0, "--state", "a cluster state describes one cluster",
                                         f"add --cluster (clusters: {', '.join(names)})")])
        workers = 1 if options.keep else build_workers(sum(len(fleet.workloads_on(n)) for n in names), len(names), options.jobs)
        job = _Job(fleet, resolved, options, write, progress, in_process=workers == 1)
        outcomes: dict[str, ClusterOutcome] = {}
        with mapped(job.build, names, workers) as results:
            # The workload rules run here while forked workers already build (the rules only add findings).
            # If they fail, the builds are thrown away unread and whatever a worker wrote is discarded; what
            # the rules did not set aside is built again, for its findings.
            check_intents(fleet, resolved if options.subset is None else {n: resolved[n] for n in names}, findings)
            for outcome in results if not findings.errors else ():
                outcomes[outcome.name] = outcome
                if built is not None:
                    built(len(outcomes), len(names))
        if findings.errors:
            raise InputError(_one_pass(fleet, resolved, findings, options))
        return CompiledFleet(fleet, outcomes, _shown(fleet, names, findings.warnings, outcomes.values(), options))


def _names(resolved: dict[str, ResolvedCluster], options: CompileOptions) -> list[str]:
    only = options.only
    return [n for n in resolved if (only is None or n == only) and (options.subset is None or n in options.subset)]


def _shown(fleet: Fleet, names: list[str], warnings: list[Diagnostic], outcomes, options: CompileOptions) -> list[Diagnostic]:
    """The fleet's warnings and its clusters', each once, sorted; with --cluster (or a subset) only theirs."""
    out = sorted(set(warnings) | {w for o in outcomes for w in o.warnings})
    if options.only is not None:
        return _about(fleet, options.only, out)
    if options.subset is not None:
        return sorted({w for name in names for w in _about(fleet, name, out)})
    return out


def _one_pass(fleet: Fleet, resolved: dict[str, ResolvedCluster], findings: Findings, options: CompileOptions) -> list[Diagnostic]:
    """Every finding of a fleet with input errors: those, and what compiling the clusters they leave whole finds
    (validate.partial says what is set aside). Nothing is written or kept; all of it sorted, so in file order."""
    aside = partial.from_findings(fleet, findings.errors)
    rest = partial.without(fleet, aside.clusters, aside.workloads)
    names = [] if aside.everything else [n for n in _names(resolved, options) if n in rest.clusters]
    if options.state is not None and len(names) != 1:
        names = []
    job = _Job(rest, resolved, dataclasses.replace(options, keep=False, digests=False), None, None)
    with mapped(job.build, names, build_workers(sum(len(rest.workloads_on(n)) for n in names), len(names), options.jobs)) as results:
        outcomes = list(results)
    found = [d for o in outcomes for d in o.infeasible + o.rejected]
    return sorted(set(findings.errors + found + _shown(fleet, names, findings.warnings, outcomes, options)))


def _about(fleet: Fleet, cluster: str, warnings: list[Diagnostic]) -> list[Diagnostic]:
    """With --cluster, the warnings about that cluster: those pointing into a workload document that targets it
    (or targets none), not into another's; elsewhere, not those of another cluster's file, nor of a file whose
    workloads all run elsewhere (findings about the fleet's layout, or no file at all, stay)."""
    mine = {w.source.file for w in fleet.workloads_on(cluster)}
    if cluster in fleet.clusters:
        mine.add(fleet.clusters[cluster].source.file)
    others = ({c.source.file for c in fleet.clusters.values()} | {w.source.file for w in fleet.workloads}) - mine
    kept = []
    for w in warnings:
        targets = fleet.targets_at(w.file, w.line)
        if (cluster in targets or not targets) if targets is not None else w.file not in others:
            kept.append(w)
    return kept


def diff_fleet(fleet: Path, base_ref: str, only: str | None = None, checks: CheckOptions | None = None,
               state: ClusterState | None = None, store: CacheStore | None = None) -> FleetDiff:
    """Compile the fleet at `base_ref` (read from git) and as it is now, place and check both sides, and
    compare them; with `state`, both sides are placed on the running cluster, next to what its claims hold.
    Bad input now is an error (exit 2); a base that does not compile is reported, so that a pull request
    fixing a broken base branch can still be reviewed. With the incremental build's `store`, a cluster whose
    inputs are the same on both sides and that the cache knows renders cleanly is reported unchanged without
    being compiled on either side (its output is a function of those inputs)."""
    options = CompileOptions(only=only, checks=checks or CheckOptions(), detail=True, missing_ok=True, state=state)
    with tempfile.TemporaryDirectory(prefix="gpuc-base-") as tmp:
        base_dir = Path(tmp) / "fleet"
        existed, commit = materialize(fleet, base_ref, base_dir)
        same, head_side, base_side = _same_on_both_sides(fleet, base_dir if existed else None, options, store)
        head = _compile_side(fleet, options, same, head_side)
        base, problems = (None, []) if not existed else _compile_base(base_dir, base_ref, options, same, base_side)
    if (only is not None and only not in same and not problems and only not in head.fleet.clusters
            and (base is None or only not in base.fleet.clusters)):
        raise InputError([Diagnostic(str(fleet), 0, "--cluster", f"no cluster named '{only}' in the fleet, now or at {base_ref}",
                                     f"clusters: {', '.join(sorted(head.fleet.clusters)) or '(none)'}")])
    diff = compare(base, head, base_ref, problems)
    cached = [ClusterDiff(name, "unchanged", feasible=(True, True)) for name in same]
    return dataclasses.replace(diff, commit=commit, clusters=sorted(diff.clusters + cached, key=lambda c: c.name))


def _same_on_both_sides(head: Path, base: Path | None, options: CompileOptions, store: CacheStore | None
                        ) -> tuple[set[str], _Side | None, _Side | None]:
    """The clusters with the same key at base and head that the cache has an entry for, and the files each
    side must still read for the others (None: read everything)."""
    if store is None or base is None:
        return set(), None, None
    checks = options.checks
    settings = Settings.of(options.only, checks.require_crds, checks.allow_replace, options.allow_infeasible, options.state,
                           tuple(checks.crds))
    # the base is the same fleet at another commit: the head's index knows its unchanged files
    now, then = safe_plan(head, settings, store, None), safe_plan(base, settings, store, None, index_of=head)
    if now is None or then is None or now.full or then.full:
        return set(), None, None
    same = {n for n in now.hits if then.keys.get(n) == now.keys[n]}

    def needs(plan: BuildPlan) -> _Side:
        built = [name for name in plan.clusters if name not in same]
        return _Side(frozenset(built), set(plan.class_files).union(plan.fresh, *(plan.needs.get(name, set()) for name in built)))

    return same, needs(now), needs(then)


@dataclass(frozen=True)
class _Side:
    """What one side of a diff still builds, and the files that takes."""

    clusters: frozenset[str]
    files: set[str]


def _compile_side(fleet: Path, options: CompileOptions, same: set[str], side: _Side | None) -> CompiledFleet:
    if not same or side is None:
        return compile_fleet(fleet, options)
    return compile_fleet(load(fleet, options.jobs, select=side.files.__contains__), dataclasses.replace(options, subset=side.clusters))


def status_cluster(source: str | os.PathLike[str], cluster: str, state: ClusterState, checks: CheckOptions | None = None) -> StatusReport:
    """The running cluster (`state`) checked against what the fleet compiles to for it. Pods that do not fit
    the running cluster are a finding, not a stop; intents render refuses are one too, and status still
    compares what compiled."""
    options = CompileOptions(only=cluster, checks=checks or CheckOptions(), detail=True, allow_infeasible=True, state=state)
    compiled = compile_fleet(source, options)
    outcome = compiled.clusters[cluster]
    if outcome.compiled is None:  # sizing failed: there is nothing to compare
        compiled.raise_if_failed("gpuc status has nothing to compare the cluster with")
        raise AssertionError("a cluster without compiled output has findings")
    report = cluster_status(outcome.compiled, state, outcome.placement)
    # what the state could not read (a kind the credentials may not list): every check that needs it is blind there
    report.findings[:0] = [Finding("access", "warn", d.message, d.hint) for d in state.warnings]
    if outcome.rejected:
        first = outcome.rejected[0]
        report.findings.insert(0, Finding("render", "fail", f"`gpuc render` refuses this cluster's output ({len(outcome.rejected)} "
                                          f"error(s); first: {first.file}:{first.line}: {first.message})",
                                          f"`gpuc validate FLEET --cluster {cluster}` lists them"))
    return report


def _compile_base(base_dir: Path, ref: str, options: CompileOptions, same: set[str], side: _Side | None
                  ) -> tuple[CompiledFleet | None, list[Diagnostic]]:
    """The fleet at `ref`, materialized in `base_dir`; with its input errors when it does not compile."""
    try:
        return _compile_side(base_dir, options, same, side), []
    except InputError as exc:
        return None, [_at_base(d, ref) for d in redacted(exc.diagnostics)]  # the report quotes them: no credential


def _at_base(d: Diagnostic, ref: str) -> Diagnostic:
    return Diagnostic(f"{ref}:{d.file}", d.line, d.path, f"(at the base) {d.message}", d.hint, d.severity)


__all__ = ["CheckOptions", "ClusterOutcome", "CompileOptions", "CompiledFleet", "OutputRejected", "Write", "compile_cluster",
           "compile_fleet", "diff_fleet", "status_cluster", "validate_clusters", "validate_fleet"]
