"""Stage 1, load: a fleet directory -> the YAML documents it holds, in a fixed order.

Layout (DESIGN.md section 3): `clusters/*.yaml` hold Cluster documents, `workloads/**/*.yaml` hold
GpuWorkload and GpuDeviceClass documents. Files are read in sorted order so that output never
depends on how the file system lists a directory.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..diagnostics import Diagnostic, Findings, InputError, tagged
from .yaml_source import SourceDoc, decode, parse_documents

YAML_SUFFIXES = (".yaml", ".yml")
LAYOUT = ("clusters", "workloads")


@dataclass
class FleetFiles:
    root: Path
    clusters: list[SourceDoc]
    workloads: list[SourceDoc]
    warnings: list[Diagnostic] = field(default_factory=list)


# Run while the workload files parse (when a reader parses them elsewhere), with the unvalidated
# cluster documents. It may return a function, which is then given each workload document as soon as
# it is read, in file order.
Meanwhile = Callable[[list[SourceDoc]], Callable[[SourceDoc], None] | None]
Parsed = list[SourceDoc] | list[Diagnostic]  # a file's documents, or why it could not be read
ReadOne = Callable[[Path, str], list[SourceDoc]]  # (path, display name) -> documents; raises InputError
# Reads (path, display name) files with a ReadOne, yielding (True, documents) or (False, diagnostics)
# per file in order; it may parse them in other processes and then runs the callable it is given
# (the loader's meanwhile) while they parse. runner.parallel_reader is one.
ReadFiles = Callable[[list[tuple[Path, str]], ReadOne, Callable[[], None] | None], Iterator[tuple[bool, Parsed]]]


def read_serially(files: list[tuple[Path, str]], read: ReadOne, meanwhile: Callable[[], None] | None) -> Iterator[tuple[bool, Parsed]]:
    """Every file in this process, in order (nothing runs alongside, so `meanwhile` is not run)."""
    for path, display in files:
        try:
            yield True, read(path, display)
        except InputError as exc:
            yield False, exc.diagnostics


class UnreadableEntry(OSError):
    """An entry of a fleet directory gpuc would read and cannot: a symbolic link to nothing (or to a directory, which
    is never followed), or a YAML name on something that is not a regular file."""


def _unreadable(entry: os.DirEntry, recursive: bool) -> str:
    """Why gpuc cannot read this entry, or "" when it can (or it is not one gpuc reads)."""
    yaml_name = Path(entry.name).suffix in YAML_SUFFIXES
    if entry.is_symlink():
        target = os.readlink(entry.path)
        if not os.path.exists(entry.path):
            return f"is a symbolic link to '{target}', which does not exist"
        if recursive and entry.is_dir():
            return f"is a symbolic link to the directory '{target}', which gpuc does not follow (it could lead out of the fleet)"
    if yaml_name and not entry.is_file() and not (recursive and entry.is_dir()):
        return "is not a regular file"
    return ""


def yaml_files(directory: Path, recursive: bool, problems: list[tuple[Path, str]] | None = None) -> list[Path]:
    """The YAML files in `directory` (and, `recursive`, below it), sorted. An entry that cannot be read (a directory,
    or one that _unreadable names) goes to `problems`, or raises OSError without it: a workload folder or file
    skipped in silence would vanish from the render, and Argo CD would prune what it held."""
    if not directory.is_dir():
        return []
    files: list[Path] = []
    pending = [directory]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                for e in entries:
                    path = Path(e.path)
                    why = _unreadable(e, recursive)
                    if why and problems is None:
                        raise UnreadableEntry(0, why, e.path)
                    if why:
                        problems.append((path, why))  # type: ignore[union-attr]
                    elif recursive and e.is_dir(follow_symlinks=False):
                        pending.append(path)
                    elif path.suffix in YAML_SUFFIXES and path.is_file():
                        files.append(path)
        except UnreadableEntry:
            raise
        except OSError as exc:
            exc.filename = str(current)
            raise
    return sorted(files, key=lambda p: p.relative_to(directory).as_posix())


def _near_miss(name: str) -> str | None:
    """clusters/ or workloads/ when `name` is a typo of it ('workload', 'Clusters'), not merely alike ('users')."""
    close = difflib.get_close_matches(name.lower(), LAYOUT, n=1, cutoff=0.85)
    return close[0] if close else None


def _is_crd(path: Path) -> bool:
    """A CRD kept under clusters/ for a cluster's spec.crds is meant to be there."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "kind: CustomResourceDefinition" in fh.read(65536)
    except OSError:
        return False


def _readable_yaml(directory: Path) -> list[Path]:
    """yaml_files for a warning's sake: what cannot be read there is reported where it is read, if anywhere."""
    try:
        return yaml_files(directory, recursive=True)
    except OSError:
        return []


def unread(root: Path) -> list[Diagnostic]:
    """YAML that a typo keeps gpuc from reading: a workload that silently vanishes from the render is
    pruned from the cluster by Argo CD. Other folders (a cluster's spec.crds, docs) and dotfiles are
    left alone; symbolic links are never followed here."""
    found = []
    for path in sorted(root.iterdir(), key=lambda p: p.name):
        if path.name.startswith(".") or path.is_symlink():
            continue
        if path.is_file() and path.suffix in YAML_SUFFIXES and path.stem != "kustomization" and not _pulumi_file(path.name):
            found.append(Diagnostic(path.name, 0, "(file)", "not read: intents live in clusters/ and workloads/",
                                    "move it to clusters/ (a Cluster) or workloads/ (GpuWorkload, GpuDeviceClass)", "warning"))
        elif path.is_dir() and path.name not in LAYOUT and (near := _near_miss(path.name)) and _readable_yaml(path):
            found.append(Diagnostic(f"{path.name}/", 0, "(directory)", "not read: gpuc reads clusters/ and workloads/",
                                    f"did you mean '{near}'? Rename the folder", "warning"))
    clusters = root / "clusters"
    nested = [] if clusters.is_symlink() else [
        p for p in _readable_yaml(clusters) if p.parent != clusters and not _is_crd(p)]
    found += [Diagnostic(p.relative_to(root).as_posix(), 0, "(file)", "not read: Cluster files sit directly in clusters/",
                         "move it up to clusters/", "warning") for p in nested]
    return found


def _pulumi_file(name: str) -> bool:
    """A Pulumi project or stack file: a fleet repository that applies its clusters with Pulumi keeps them at its root."""
    return name.split(".")[0] == "Pulumi"


def _escapes(root: Path, file: Path) -> bool:
    """A symlink out of the fleet: a pull request must not make gpuc read files of the CI machine."""
    return not file.resolve().is_relative_to(root.resolve())


def read_documents(path: Path, display: str) -> list[SourceDoc]:
    """Documents of one file; an unreadable or empty file is an input error."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError([Diagnostic(display, 0, "(file)", f"cannot read file: {exc.strerror or exc}",
                                     "give the user running gpuc read access to it, or move it out of the fleet")]) from None
    docs = parse_documents(decode(data, display), display)
    if not docs:
        raise InputError([Diagnostic(display, 1, "(file)", "file holds no YAML document",
                                     "add a document or delete the file")])
    return docs


def _listed(root: Path, directory: Path, recursive: bool, findings: Findings) -> list[Path]:
    """yaml_files, where an entry or a directory that cannot be read is an error like a file that cannot be read."""
    problems: list[tuple[Path, str]] = []
    try:
        files = yaml_files(directory, recursive, problems)
    except OSError as exc:
        where = Path(exc.filename or directory)
        shown = where.relative_to(root).as_posix() if where.is_relative_to(root) else str(where)
        findings.add(Diagnostic(shown, 0, "(directory)", f"cannot read directory: {exc.strerror or exc}",
                                "give the user running gpuc read access to it, or move what it holds out of the fleet"))
        return []
    for path, why in problems:
        hint = ("put the directory itself (not a link to it) under workloads/" if path.is_symlink() and path.is_dir() else
                "point the link at a file inside the fleet, or delete it" if path.is_symlink() else
                "replace it with a YAML file, or move it out of the fleet")
        findings.add(Diagnostic(path.relative_to(root).as_posix(), 0, "(file)", why, hint))
    return files


def load_fleet(root: str | os.PathLike[str], meanwhile: Meanwhile | None = None,
               read_files: ReadFiles = read_serially, select: Callable[[str], bool] | None = None,
               keep: Callable[[SourceDoc], bool] | None = None) -> FleetFiles:
    """Every document of the fleet, parsed by `read_files`; `meanwhile` runs while it parses the
    workload files elsewhere (see Meanwhile), and is not run when they are parsed here. `select` (given a
    workload file's fleet-relative path) leaves out files an incremental build does not need, and `keep`
    the documents of the files it reads that it does not need (they are neither checked nor built)."""
    root = Path(root)
    if not root.is_dir():
        what = "is a file, not a fleet directory" if root.exists() else "fleet directory does not exist"
        raise InputError([Diagnostic(str(root), 0, "(fleet)", what, "pass the directory that holds clusters/ and workloads/")])
    findings = Findings()
    clusters_dir = root / "clusters"
    cluster_files = _listed(root, clusters_dir, False, findings)
    if not cluster_files and not findings.errors:
        findings.add(Diagnostic(str(root), 0, "clusters/", "fleet has no clusters/*.yaml",
                                "create clusters/<name>.yaml with a `kind: Cluster` document"))

    read_along: list[Callable[[SourceDoc], None]] = []  # what `meanwhile` returned, once it has run

    def start_meanwhile() -> None:
        hook = meanwhile(clusters)  # type: ignore[misc]
        if hook is not None:
            read_along.append(hook)

    def collect(files: list[Path], overlap: Callable[[], None] | None = None, keep: Callable[[SourceDoc], bool] | None = None
                ) -> list[SourceDoc]:
        readable = []
        for file in files:
            display = file.relative_to(root).as_posix()
            if _escapes(root, file):
                findings.add(Diagnostic(display, 0, "(file)", "is a symbolic link to a file outside the fleet directory",
                                        "copy the file into the fleet instead of linking to it"))
            else:
                readable.append((file, display))
        docs: list[SourceDoc] = []
        for ok, parsed in read_files(readable, read_documents, overlap):
            if ok:
                kept: list[SourceDoc] = [d for d in parsed if keep is None or keep(d)]  # type: ignore[misc,arg-type]
                docs.extend(kept)
                for hook in read_along:
                    for doc in kept:
                        hook(doc)
            else:
                findings.extend(parsed)  # type: ignore[arg-type]
        return docs

    clusters = collect(cluster_files)
    workload_files = _listed(root, root / "workloads", True, findings)
    if select is not None:
        workload_files = [f for f in workload_files if select(f.relative_to(root).as_posix())]
    workloads = collect(workload_files, start_meanwhile if meanwhile else None, keep)
    findings.tag_since(0, "files")
    findings.raise_if_errors()
    return FleetFiles(root, clusters, workloads, tagged(unread(root), "files"))
