"""Stage 1, load: a fleet directory -> the YAML documents it holds, in a fixed order.

Layout (DESIGN.md section 3): `clusters/*.yaml` hold Cluster documents, `workloads/**/*.yaml` hold
GpuWorkload and GpuDeviceClass documents. Files are read in sorted order so that output never
depends on how the file system lists a directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..diagnostics import Diagnostic, Findings, InputError
from .yaml_source import SourceDoc, decode, parse_documents

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass
class FleetFiles:
    root: Path
    clusters: list[SourceDoc]
    workloads: list[SourceDoc]


def _yaml_files(directory: Path, recursive: bool) -> list[Path]:
    if not directory.is_dir():
        return []
    pattern = "**/*" if recursive else "*"
    files = [p for p in directory.glob(pattern) if p.suffix in YAML_SUFFIXES and p.is_file()]
    return sorted(files, key=lambda p: p.relative_to(directory).as_posix())


def read_documents(path: Path, display: str) -> list[SourceDoc]:
    """Documents of one file; an unreadable or empty file is an input error."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError([Diagnostic(display, 0, "(file)", f"cannot read file: {exc.strerror}")]) from None
    docs = parse_documents(decode(data, display), display)
    if not docs:
        raise InputError([Diagnostic(display, 1, "(file)", "file holds no YAML document",
                                     "add a document or delete the file")])
    return docs


def load_fleet(root: str | os.PathLike[str]) -> FleetFiles:
    root = Path(root)
    if not root.is_dir():
        raise InputError([Diagnostic(str(root), 0, "(fleet)", "fleet directory does not exist",
                                     "pass the directory that holds clusters/ and workloads/")])
    findings = Findings()
    clusters_dir = root / "clusters"
    if not _yaml_files(clusters_dir, recursive=False):
        findings.add(Diagnostic(str(root), 0, "clusters/", "fleet has no clusters/*.yaml",
                                "create clusters/<name>.yaml with a `kind: Cluster` document"))

    def collect(files: list[Path]) -> list[SourceDoc]:
        docs: list[SourceDoc] = []
        for file in files:
            try:
                docs.extend(read_documents(file, file.relative_to(root).as_posix()))
            except InputError as exc:
                findings.extend(exc.diagnostics)
        return docs

    clusters = collect(_yaml_files(clusters_dir, recursive=False))
    workloads = collect(_yaml_files(root / "workloads", recursive=True))
    findings.raise_if_errors()
    return FleetFiles(root, clusters, workloads)
