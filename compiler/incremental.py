"""The incremental build: rebuild only the clusters whose inputs changed, the rest from the cache.

The unit is the cluster. A cluster's key digests gpuc itself, the options and CRDs its checks use, every
Cluster file (a workload's rules read the clusters it targets), every GpuDeviceClass document, and the
workload documents that target it, each by its lines, where they start and its place in its file
(not the whole file: one file may hold workloads of many clusters, and a change to one of them must not
rebuild the others). A cluster whose key has an entry is a hit when
its previous output is still on disk exactly as that entry describes it (the render hard-links it into
the new tree); every other cluster is rebuilt whole: lowered, checked and placed again, because
placement is a question about the whole cluster (one more replica can move every pod after it), and
lowering and checks per workload are the smaller part of a cluster's build. Only the files the rebuilt
clusters read are parsed; fleet-wide facts a partial load cannot see (a name defined twice in files of
different clusters) are checked on the scanned documents, and anything unusual falls back to the full
build, which reports it. Entries are stored only for clusters whose findings cannot depend on the
previous tree (nothing was judged as an update of a previous object), so a hit prints exactly the
findings a full build would, and the tree is byte-identical to a full render's.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path

from .cache.plan import BuildPlan, listing
from .cache.store import CacheStore, Entry
from .check.gate import ClusterOutcome, CompiledFleet
from .diagnostics import Diagnostic
from .load.fleet import unread
from .load.yaml_source import SourceDoc
from .pipeline import CompileOptions, Write, compile_fleet
from .runner import load
from .validate.documents import Fleet


def compile_cached(root: Path, options: CompileOptions, plan: BuildPlan | None, write: Write | None = None,
                   built: Callable[[int, int], None] | None = None) -> CompiledFleet:
    """compile_fleet, with the clusters `plan` (cache.plan.safe_plan; None: no cache) found in the cache taken
    from it: their output is already on disk exactly as a build would write it, so `write` is called only for
    the clusters built."""
    if plan is None or plan.full or not plan.hits:
        options = dataclasses.replace(options, digests=plan is not None and not plan.full)
        return compile_fleet(load(root, options.jobs), options, write=write, built=built)
    misses = plan.misses
    outcomes: dict[str, ClusterOutcome] = {}
    warnings: set[Diagnostic] = set()
    fleet = Fleet(root)
    if misses or plan.fresh:  # files no build validated are read even when every cluster is a hit
        needed = set(plan.class_files).union(plan.fresh, *(plan.needs[m] for m in misses))
        wanted = set().union(*(plan.documents[m] for m in misses))

        def keep(doc: SourceDoc) -> bool:
            """The rebuilt clusters' workloads, every device class, and everything of a file no build validated yet:
            a file's workloads of other clusters are theirs (unchanged, or they would be rebuilt too)."""
            return doc.file in plan.fresh or (doc.file, doc.index) in wanted \
                or not (isinstance(doc.value, dict) and doc.value.get("kind") == "GpuWorkload")

        partial = compile_fleet(load(root, options.jobs, select=needed.__contains__, keep=keep),
                                dataclasses.replace(options, subset=frozenset(misses), digests=True), write=write, built=built)
        fleet, warnings = partial.fleet, set(partial.warnings)
        outcomes.update(partial.clusters)
    if not misses:
        warnings.update(unread(root))  # what a load reports of the fleet's layout, found again each run
    for name, entry in plan.hits.items():
        counts = entry.counts
        outcomes[name] = ClusterOutcome(name, warnings=list(entry.warnings), unplaced=counts.get("unplaced", 0),
                                        objects=counts.get("objects", 0), releases=counts.get("releases", 0),
                                        applications=counts.get("applications", 0), checked=counts.get("checked", 0),
                                        paths=sorted(entry.files))
        warnings.update(entry.warnings)
    ordered = {name: outcomes[name] for name in plan.order if name in outcomes}
    return CompiledFleet(fleet, ordered, sorted(warnings))


def remember(store: CacheStore, root: Path, plan: BuildPlan | None, built: CompiledFleet, tree: Path | None) -> None:
    """After a build that passed (and, for render, was swapped into `tree`): an entry for every rebuilt
    cluster whose findings did not depend on a previous tree, the new stamps of hits whose files were read,
    and the fleet's index."""
    if plan is None or plan.full:
        return
    for name, outcome in built.clusters.items():
        hit = plan.hits.get(name)
        if hit is not None:
            if hit.restamped:
                store.save(hit)
            continue
        if outcome.digests is None or outcome.updated or name not in plan.keys:
            continue
        mine = {w for w in built.warnings if w in set(outcome.warnings) or _concerns(w, name, built.fleet)}
        counts = {"objects": outcome.objects, "releases": outcome.releases, "applications": outcome.applications,
                  "checked": outcome.checked, "unplaced": outcome.unplaced}
        stamps: dict[str, list[int]] = {}
        if tree is not None:
            with contextlib.suppress(OSError):
                stamps = {rel: [st.st_size, st.st_mtime_ns] for rel, st in listing(str(tree / name)).items()}
        store.save(Entry(name, plan.keys[name], sorted(mine), counts, outcome.digests, stamps))
    store.save_index(root, plan.index)


def _concerns(warning: Diagnostic, cluster: str, fleet: Fleet) -> bool:
    """A fleet warning that belongs to this cluster's entry: about its Cluster file, a workload document that
    targets it (or targets none: every build checks those), or a device class (the fleet's layout warnings
    are found again by every load, so no entry keeps them). A warning about another cluster's workload in a
    file this one shares is that cluster's: its entry keys on that document, this one's does not."""
    if cluster in fleet.clusters and warning.file == fleet.clusters[cluster].source.file:
        return True
    targets = fleet.targets_at(warning.file, warning.line)
    if targets is not None:
        return cluster in targets or not targets
    return (any(warning.file == w.source.file for w in fleet.workloads_on(cluster))
            or any(warning.file == c.source.file for c in fleet.classes.values()))
