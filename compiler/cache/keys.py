"""What a cluster's compiled output depends on, as digests: the fleet files it reads, gpuc itself, the
options and the CRDs its checks use.

A file's documents are scanned (kind, name, the clusters a workload targets, where the document sits and
a digest of its lines) only when the file is new or changed; an unchanged file's scan comes from the index
of the last build. A scan never judges the input: anything unusual (a parse error, a document that is not
a mapping) returns None, and the build falls back to the full compile, which reports it with file, line
and field.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from ..load.fleet import yaml_files

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# the libraries whose behaviour shapes output or findings (schemas, CEL, YAML, models)
DEPENDENCIES = ("pydantic", "pyyaml", "cel-python", "kubernetes-validate")
PACKAGE = Path(__file__).resolve().parents[1]  # compiler/
SOURCE_SUFFIXES = (".py", ".yaml", ".lua")


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@cache
def build_digest() -> str:
    """gpuc as built: every source and fact file of the package, Python and the dependencies' versions. A
    cache written by another gpuc (another commit, an edited fact table) never matches."""
    h = hashlib.blake2b(digest_size=16)
    h.update(sys.version.encode())
    for name in DEPENDENCIES:
        try:
            h.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name}=none".encode())
    for path in sorted(p for p in PACKAGE.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts):
        h.update(path.relative_to(PACKAGE).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def tree_digest(directory: Path, within: Path | None = None) -> str:
    """Every YAML file under a directory (a CRD directory), by content. ValueError, before it is opened, for a
    file that resolves outside `within` (default: the directory): the full build refuses it and says why."""
    h = hashlib.blake2b(digest_size=16)
    if directory.is_dir():
        limit = (within or directory).resolve()
        for path in yaml_files(directory, recursive=True):
            if not path.resolve().is_relative_to(limit):
                raise ValueError(f"{path} leads outside {limit}")
            h.update(path.relative_to(directory).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def value_digest(value: Any) -> str:
    return digest(json.dumps(value, sort_keys=True, default=str).encode())


@dataclass(frozen=True)
class DocRef:
    """What the incremental build needs to know of one document without validating it."""

    kind: str
    name: str
    namespace: str = ""
    clusters: tuple[str, ...] | None = None  # a workload's or class's spec.clusters (None: every cluster)
    crds: str | None = None  # a Cluster's spec.crds
    index: int = 0  # its position in the file, empty documents counted (the `file#index` every emitted object names)
    span: str = ""  # digest of its lines and the line they start at (see _spans)

    def as_list(self) -> list[Any]:
        return [self.kind, self.name, self.namespace, list(self.clusters) if self.clusters is not None else None, self.crds,
                self.index, self.span]

    @classmethod
    def from_list(cls, raw: Any) -> DocRef:
        kind, name, namespace, clusters, crds, index, span = raw
        if not (isinstance(kind, str) and isinstance(name, str) and isinstance(namespace, str)):
            raise ValueError("malformed document reference")
        if clusters is not None and not (isinstance(clusters, list) and all(isinstance(c, str) for c in clusters)):
            raise ValueError("malformed cluster list")
        if not (isinstance(index, int) and isinstance(span, str)):
            raise ValueError("malformed document position")
        return cls(kind, name, namespace, tuple(clusters) if clusters is not None else None, crds if isinstance(crds, str) else None,
                   index, span)


def scan(data: bytes) -> list[DocRef] | None:
    """The documents of one intent file, or None when it is anything but plainly well-formed."""
    try:
        text = data.decode("utf-8")
        loader = _Loader(text)
        found: list[tuple[int, int, Any]] = []  # (index, first line of its content, value) of each non-empty document
        try:
            index = 0
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    break
                value = loader.construct_document(node)
                if value is not None:  # an empty document still counts in the index, as the loader counts it
                    found.append((index, node.start_mark.line, value))
                index += 1
        finally:
            loader.dispose()
    except Exception:  # libyaml's constructors raise more than YAMLError on odd tags: the full build reports them
        return None
    out = []
    for (index, _, doc), span in zip(found, _spans(text, [line for _, line, _ in found])):
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            return None
        meta, spec = doc.get("metadata"), doc.get("spec")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not isinstance(spec, dict):
            return None
        clusters = spec.get("clusters")
        if clusters is not None and not (isinstance(clusters, list) and all(isinstance(c, str) for c in clusters)):
            return None
        crds = spec.get("crds") if doc["kind"] == "Cluster" else None
        namespace = meta.get("namespace", "default" if doc["kind"] == "GpuWorkload" else "")
        if not isinstance(namespace, str) or (crds is not None and not isinstance(crds, str)):
            return None
        out.append(DocRef(doc["kind"], meta["name"], namespace, tuple(clusters) if clusters is not None else None, crds, index, span))
    return out or None


def _spans(text: str, starts: list[int]) -> list[str]:
    """A digest per document of the lines it owns: from where its content starts (the first document: the
    file's first line) to where the next one's starts, with that line's number. The spans cover the file,
    so any edit changes some document's digest, and a document whose digest is unchanged has the same text
    on the same lines (the same line numbers in every finding). Where a line break or directive could make
    one document's lines mean something for another (a lone CR, Unicode line separators, %TAG), every
    document of the file gets the whole file's digest instead."""
    lines = text.split("\n")
    if any(c in text for c in "\x85\u2028\u2029") or "\r" in text.replace("\r\n", "") or any(line.startswith("%") for line in lines):
        return [digest(text.encode())] * len(starts)
    bounds = [0, *starts[1:], len(lines)]
    return [digest(f"{bounds[i]}\n".encode() + "\n".join(lines[bounds[i]:bounds[i + 1]]).encode()) for i in range(len(starts))]
