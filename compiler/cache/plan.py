"""Which clusters an incremental build can take from the cache (see compiler.incremental).

Light on purpose: it imports no compiler stage, so `gpuc render` can plan in a forked process while it
imports the compiler. A hit needs the cluster's key to have an entry and the cluster's previous output on
disk to be exactly what the entry describes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..load.fleet import yaml_files
from ..load.yaml_source import MAX_FILE_BYTES
from .keys import DocRef, build_digest, digest, scan, tree_digest, value_digest
from .store import CacheStore, Entry, Index


@dataclass(frozen=True)
class Settings:
    """The build options a cluster's output or findings depend on, as plain data."""

    only: str | None = None
    options: Any = None  # JSON-able: require-crds, allow-replace, allow-infeasible, the running cluster's objects
    crds: tuple[Path, ...] = ()  # --crds directories (their content is part of every key)

    @classmethod
    def of(cls, only: str | None, require_crds: bool, allow_replace: bool, allow_infeasible: bool, state: Any,
           crds: tuple[Path, ...]) -> Settings:
        """`state`: the running cluster (a ClusterState) or None; its objects are inputs of placement."""
        objects = None if state is None else [o.raw for o in state.objects]
        return cls(only, {"requireCrds": require_crds, "allowReplace": allow_replace, "allowInfeasible": allow_infeasible,
                          "state": objects}, crds)


def safe_plan(root: Path, settings: Settings, store: CacheStore, tree: Path | None, index_of: Path | None = None) -> BuildPlan | None:
    """plan_build, where a fleet or tree that changes under it (a file gone between listing and reading)
    means a full build, never a failure."""
    try:
        plan = plan_build(root, settings, store, tree, index_of)
        if plan is None and store.notes:  # a full build, and what could not be read of the cache is still said
            return BuildPlan(Index(), [], {}, {}, notes=list(store.notes), full=True)
        return plan
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return BuildPlan(Index(), [], {}, {}, notes=[*store.notes, f"cache not used: {exc}"], full=True)


@dataclass
class BuildPlan:
    index: Index
    order: list[str]  # the clusters to build, in the fleet's order
    keys: dict[str, str]
    needs: dict[str, set[str]]  # cluster -> workload files its build reads (those holding its documents)
    documents: dict[str, set[tuple[str, int]]] = field(default_factory=dict)  # cluster -> (file, index) of its workloads
    hits: dict[str, Entry] = field(default_factory=dict)
    clusters: tuple[str, ...] = ()  # every cluster of the fleet (order is those to build)
    class_files: frozenset[str] = frozenset()  # files holding GpuDeviceClasses: every build reads them
    # files no build validated (new or changed since the index): every build reads them, so that a file the
    # keys do not reach (a workload aimed only at an unknown cluster) is validated as a cold build does
    fresh: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)  # what could not be read of the cache (the plan may run in a fork)
    full: bool = False  # the cache could not be used this time: build everything, remember nothing

    @property
    def misses(self) -> list[str]:
        return [c for c in self.order if c not in self.hits]


def listing(directory: str, prefix: str = "") -> dict[str, os.stat_result]:
    """Every file under `directory`, by relative path, with its stat (symbolic links are not files here)."""
    out: dict[str, os.stat_result] = {}
    with os.scandir(directory) as entries:
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                out.update(listing(e.path, f"{prefix}{e.name}/"))
            else:
                out[prefix + e.name] = e.stat(follow_symlinks=False)
    return out


def _same_tree(directory: Path, entry: Entry) -> bool:
    """Whether `directory` holds exactly the entry's files, byte for byte: by size and mtime when the entry
    saw them last, else by reading them (and then the entry learns the new stamps)."""
    try:
        found = listing(str(directory))
    except OSError:
        return False
    if found.keys() != entry.files.keys():
        return False
    stamps = {rel: [st.st_size, st.st_mtime_ns] for rel, st in found.items()}
    if stamps == entry.stamps:
        return True
    base = str(directory) + os.sep
    try:
        for rel, want in entry.files.items():
            with open(base + rel, "rb") as fh:
                if digest(fh.read()) != want:
                    return False
    except OSError:
        return False
    entry.stamps = stamps
    entry.restamped = True
    return True


def _scan_fleet(root: Path, old: Index) -> tuple[Index, frozenset[str]] | None:
    """Every intent file's digest and documents (scanned again only when changed), and the files that no earlier
    build validated (new or changed: the build must read them whatever the cache holds); None when the fleet has
    anything the full build should report (a symlink out of the fleet, a file too large to parse, a file that
    does not scan, a file or folder that cannot be read: the full build names it first, not a cache note)."""
    index = Index()
    fresh = set()
    try:
        files = yaml_files(root / "clusters", recursive=False) + yaml_files(root / "workloads", recursive=True)
    except OSError:
        return None
    for path in files:
        rel = path.relative_to(root).as_posix()
        if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
            return None
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_FILE_BYTES:
            return None  # refused before any parse
        sha = digest(data)
        known = old.files.get(rel)
        if known is None or known[0] != sha:
            fresh.add(rel)
        refs = known[1] if known is not None and known[0] == sha else scan(data)
        if refs is None:
            return None
        index.files[rel] = (sha, refs)
    return index, frozenset(fresh)


def _only_about(refs: list[DocRef], cluster: str) -> bool:
    """Whether a file's documents concern `cluster` alone (its Cluster, or workloads and classes aimed at it only)."""
    return all(r.name == cluster if r.kind == "Cluster" else r.clusters == (cluster,) for r in refs)


Place = tuple[str, int, str]  # a document: (file, index in the file, digest of its lines)


def plan_build(root: Path, settings: Settings, store: CacheStore, tree: Path | None, index_of: Path | None = None
               ) -> BuildPlan | None:
    """Which clusters the cache has, verified against `tree` (the output directory, or --previous; None:
    nothing on disk to match, as for `validate` without --previous). None: build everything. `index_of`: the
    fleet whose index holds what earlier builds saw of these files (default `root`; the diff's base, a copy of
    the fleet at a commit in a temporary directory, is the fleet itself at another time): a file whose path and
    content match a record there is neither scanned again nor fresh."""
    scanned = _scan_fleet(root, store.index(index_of or root))
    if scanned is None:
        return None
    index, fresh = scanned
    cluster_files = [(p, sha) for p, (sha, _) in sorted(index.files.items()) if p.startswith("clusters/")]
    clusters: dict[str, DocRef] = {}
    seen: set[tuple[str, str, str]] = set()
    classes: set[Place] = set()  # every GpuDeviceClass document: an input of every cluster
    for rel, (_, refs) in sorted(index.files.items()):
        for ref in refs:
            key = (ref.kind, ref.namespace, ref.name)
            if key in seen or (rel.startswith("clusters/") != (ref.kind == "Cluster")):
                return None  # defined twice, or in the wrong place: the full build says where
            seen.add(key)
            if ref.kind == "Cluster":
                clusters[ref.name] = ref
            elif ref.kind == "GpuDeviceClass":
                classes.add((rel, ref.index, ref.span))
            elif ref.kind != "GpuWorkload":
                return None
    if settings.only is not None and any(not _only_about(index.files[rel][1], settings.only) for rel in fresh):
        return None  # a cold --cluster build runs every cluster's rules over the fleet: so does this one
    inputs = _workload_inputs(index, list(clusters))
    if inputs is None:
        return None
    docs, files, near = inputs
    common = value_digest({"build": build_digest(), "options": settings.options, "crds": [tree_digest(d) for d in settings.crds]})
    order = [n for n in clusters if settings.only is None or n == settings.only]
    plan = BuildPlan(index, order, {}, {}, clusters=tuple(clusters), class_files=frozenset(rel for rel, _, _ in classes),
                     fresh=fresh)
    for name in order:
        # a workload that also targets other clusters carries findings about them too, which their own workloads
        # shape (derived gates, sizing): their documents are inputs of this entry as well
        read = sorted(set().union(*(docs[n] for n in near[name])))
        own_crds = clusters[name].crds
        if own_crds is not None and (Path(own_crds).is_absolute() or not (root / own_crds).resolve().is_relative_to(root.resolve())):
            return None  # validation refuses it, before anything there is opened
        plan.needs[name] = files[name]
        plan.documents[name] = {(rel, at) for rel, at, _ in docs[name]}
        plan.keys[name] = value_digest([common, name, cluster_files, sorted(classes), read,
                                        tree_digest(root / own_crds, root) if own_crds else None])
        entry = store.entry(name, plan.keys[name])
        if entry is not None and (tree is None or _same_tree(tree / name, entry)):
            plan.hits[name] = entry
    plan.notes = list(store.notes)
    return plan


def _workload_inputs(index: Index, clusters: list[str]
                     ) -> tuple[dict[str, set[Place]], dict[str, set[str]], dict[str, set[str]]] | None:
    """Per cluster: the workload documents that target it, the files holding them (what its build reads), and
    the clusters it shares a document with. A cluster's key holds its documents, not whole files: a change to
    one workload rebuilds the clusters it targets (before and after the change: the old document is in the
    old keys), however many others its file serves. A document targeting no cluster is an input of every
    cluster (any build checks it); one naming a cluster the fleet lacks is an error the full build reports."""
    docs: dict[str, set[Place]] = {n: set() for n in clusters}
    files: dict[str, set[str]] = {n: set() for n in clusters}
    near: dict[str, set[str]] = {n: {n} for n in clusters}
    for rel, (_, refs) in sorted(index.files.items()):
        for ref in refs:
            if ref.kind != "GpuWorkload":
                continue
            names = clusters if ref.clusters is None else ref.clusters
            if not docs.keys() >= set(names):
                return None
            place = (rel, ref.index, ref.span)
            for n in names or clusters:
                docs[n].add(place)
                files[n].add(rel)
            for n in names:
                near[n].update(names)
    return docs, files, near
