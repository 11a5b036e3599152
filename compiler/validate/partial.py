"""One pass: when some input is wrong, the rest of the fleet is still checked and compiled, so one run reports
every finding the fleet has (not the first stage's only), and never one that only the broken input causes.

What is set aside, and why:
- a cluster whose own document did not validate or resolve, or whose cluster rules failed: compiling it needs it whole;
- every cluster a broken GpuDeviceClass may apply to: its workloads' requests cannot be judged without the class;
- workloads and classes that target a set-aside cluster (or every cluster): on the rest their references would read
  as unknown, which is the broken document's finding, not theirs;
- workloads whose own rules failed: lowering assumes rule-valid workloads.
A workload set aside only takes findings away from its clusters (fewer claims, fewer pods); the namespaces it
would have used are recorded (`Fleet.incomplete`) so that no rule calls them unused.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from ..diagnostics import Diagnostic
from ..load.yaml_source import SourceDoc
from .documents import Fleet, Intent
from .intents import Cluster, GpuDeviceClass

EVERY = "*"  # an unknown cluster or namespace: it may be any


@dataclass(frozen=True)
class SetAside:
    clusters: frozenset[str]  # EVERY among them: all
    workloads: frozenset[int]  # ids of workload intents

    @property
    def everything(self) -> bool:
        return EVERY in self.clusters


def _raw(doc: SourceDoc, *path: str) -> object:
    value: object = doc.value
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _raw_targets(doc: SourceDoc) -> set[str]:
    """The clusters a document that did not validate names in spec.clusters; EVERY when it names none or cannot be read."""
    listed = _raw(doc, "spec", "clusters")
    if isinstance(listed, list) and listed and all(isinstance(n, str) for n in listed):
        return set(listed)
    return {EVERY}


def from_documents(failed: Iterable[SourceDoc]) -> tuple[set[str], set[str]]:
    """(clusters, namespaces) that documents which did not validate leave incomplete."""
    clusters: set[str] = set()
    namespaces: set[str] = set()
    for doc in failed:
        kind, name = _raw(doc, "kind"), _raw(doc, "metadata", "name")
        if kind == "Cluster" or doc.file.startswith("clusters/"):
            clusters.add(name if isinstance(name, str) else EVERY)
        elif kind == "GpuDeviceClass":
            clusters |= _raw_targets(doc)
        else:  # a workload, or a document whose kind cannot be read: the clusters it would run on lose it
            namespace = _raw(doc, "metadata", "namespace")
            namespaces.add(namespace if isinstance(namespace, str) else EVERY)
    return clusters, namespaces


def from_findings(fleet: Fleet, errors: Iterable[Diagnostic]) -> SetAside:
    """What rule errors set aside: the document each error points into decides (an error in a document that did not
    validate was dealt with by `from_documents`; one that points into no document sets everything aside)."""
    clusters: set[str] = set()
    workloads: set[int] = set()
    held = _documents(fleet)
    for d in errors:
        starts, docs = held.get(d.file, ([], []))
        at = bisect.bisect_right(starts, d.line) - 1 if d.line else -1
        found = docs[at] if at >= 0 else None
        if isinstance(found, SourceDoc):
            continue
        if found is None:
            clusters.add(EVERY)
        elif isinstance(found.model, Cluster):
            clusters.add(found.model.metadata.name)
        elif isinstance(found.model, GpuDeviceClass):
            clusters |= set(found.model.spec.clusters) if found.model.spec.clusters is not None else {EVERY}
        else:
            workloads.add(id(found))
    return SetAside(frozenset(clusters), frozenset(workloads))


def _documents(fleet: Fleet) -> dict[str, tuple[list[int], list[Intent | SourceDoc]]]:
    """Per file, where each document starts and what became of it (an intent, or the document that did not validate)."""
    every: list[Intent | SourceDoc] = [*fleet.clusters.values(), *fleet.workloads, *fleet.classes.values(), *fleet.unvalidated]
    by_file: dict[str, list[Intent | SourceDoc]] = {}
    for item in sorted(every, key=lambda i: (i.start_line if isinstance(i, SourceDoc) else i.source.start_line)):
        by_file.setdefault(item.file if isinstance(item, SourceDoc) else item.source.file, []).append(item)
    return {f: ([i.start_line if isinstance(i, SourceDoc) else i.source.start_line for i in items], items)
            for f, items in by_file.items()}


def _touches(intent: Intent, clusters: set[str] | frozenset[str]) -> bool:
    listed = intent.model.spec.clusters
    return listed is None or bool(clusters & set(listed)) if clusters else False


def without(fleet: Fleet, clusters: set[str] | frozenset[str], workloads: frozenset[int] = frozenset(),
            namespaces: set[str] | None = None) -> Fleet:
    """The fleet less the clusters set aside, the workloads and classes that target one of them, and `workloads`
    (by id); the namespaces of every workload left out (and `namespaces`) are recorded as incomplete."""
    if EVERY in clusters:
        clusters = set(fleet.clusters) | {EVERY}
    kept = [w for w in fleet.workloads if id(w) not in workloads and not _touches(w, clusters)]
    kept_ids = {id(w) for w in kept}
    gone = {w.model.metadata.namespace for w in fleet.workloads if id(w) not in kept_ids}
    out = Fleet(fleet.root, {n: c for n, c in fleet.clusters.items() if n not in clusters}, kept,
                {n: c for n, c in fleet.classes.items() if not _touches(c, clusters)})
    out.incomplete = frozenset(fleet.incomplete | gone | (namespaces or set()))
    out.unvalidated = fleet.unvalidated
    return out


__all__ = ["EVERY", "SetAside", "from_documents", "from_findings", "without"]
