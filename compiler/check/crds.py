"""CustomResourceDefinitions the user points gpuc at: read from directories, indexed by group and kind.

Users validate against the operator versions they run, so gpuc ships no CRDs: a cluster's
`spec.crds` directory (relative to the fleet root) and every `--crds DIR` are searched, recursively.
Files may hold anything (charts keep CRDs beside samples); only `CustomResourceDefinition`
documents count. The cluster's own directory wins over `--crds`; two different CRDs for one kind
at the same level are an error, because gpuc could not know which one the cluster runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ..diagnostics import Diagnostic, InputError
from ..facts import load_table
from .schema import Compiler, Node, SchemaError

YAML_SUFFIXES = (".yaml", ".yml")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # CRDs are large; the C parser is 10x faster


@dataclass(frozen=True)
class CrdVersion:
    name: str
    served: bool
    schema: dict[str, Any] | None


@dataclass
class Crd:
    group: str
    kind: str
    plural: str
    scope: str  # Namespaced | Cluster
    versions: dict[str, CrdVersion]
    file: str  # where it was read, for messages
    _nodes: dict[str, Node] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def served_versions(self) -> list[str]:
        return [v.name for v in self.versions.values() if v.served]

    def schema_node(self, version: str) -> Node | None:
        """The compiled `openAPIV3Schema` of a version (compiled once); None when it has none."""
        if version not in self._nodes:
            raw = self.versions[version].schema
            if raw is None:
                return None
            try:
                node = Compiler(structural=True).compile(raw)
            except SchemaError as exc:
                raise InputError([Diagnostic(self.file, 0, f"{self.label} {version}", f"cannot use this CRD's schema: {exc}")]) from None
            # The API server handles metadata itself (ObjectMeta rules); a CRD's `metadata: {type: object}`
            # does not mean "no fields", and apiVersion/kind are always accepted at the root.
            node.skip = frozenset({"metadata", "apiVersion", "kind"})
            self._nodes[version] = node
        return self._nodes[version]

    def same_definition(self, other: Crd) -> bool:
        return (self.group, self.kind, self.scope, self.versions) == (other.group, other.kind, other.scope, other.versions)


@dataclass(frozen=True)
class CrdCatalog:
    """The CRDs one cluster is checked against, and where they were looked for."""

    by_kind: dict[tuple[str, str], Crd]
    searched: tuple[str, ...]
    # kinds with several definitions and no version to choose by: an error only for a kind the cluster uses (a
    # charts folder holds the CRDs of every operator release the fleet pins, and of charts a cluster does not run)
    ambiguous: dict[tuple[str, str], InputError] = field(default_factory=dict)

    def find(self, group: str, kind: str) -> Crd | None:
        if (group, kind) in self.ambiguous:
            raise self.ambiguous[(group, kind)]
        return self.by_kind.get((group, kind))


def _parse_crd(doc: dict, display: str) -> Crd:
    def bad(message: str) -> InputError:
        return InputError([Diagnostic(display, 0, "(CustomResourceDefinition)", message,
                                      "point --crds at CRD files as the operator ships them")])

    if doc.get("apiVersion") != "apiextensions.k8s.io/v1":
        raise bad(f"{doc.get('apiVersion')} CustomResourceDefinitions were removed in Kubernetes 1.22; "
                  "gpuc reads apiextensions.k8s.io/v1 CRDs")
    spec = doc.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict) or not isinstance(spec.get("versions"), list):
        raise bad("not a CustomResourceDefinition: spec.group, spec.names and spec.versions are required")
    versions = {}
    for v in spec["versions"]:
        if not isinstance(v, dict) or "name" not in v:
            raise bad("each spec.versions entry needs a name")
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        versions[str(v["name"])] = CrdVersion(str(v["name"]), bool(v.get("served", True)), schema)
    names = spec["names"]
    return Crd(str(spec.get("group", "")), str(names.get("kind", "")), str(names.get("plural", "")),
               str(spec.get("scope", "Namespaced")), versions, display)


def _read_file(path: Path, display: str) -> list[Crd]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Diagnostic(display, 0, "(file)", f"cannot read CRD file: {exc}")]) from None
    if "CustomResourceDefinition" not in text:
        return []  # samples, values, anything else a chart directory holds
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError([Diagnostic(display, mark.line + 1 if mark else 0, "(file)", f"invalid YAML in CRD file: {getattr(exc, 'problem', exc)}")]) from None
    return [_parse_crd(d, display) for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]


_cache: dict[tuple, list[Crd]] = {}


def _crd_candidate(path: Path, top: Path) -> bool:
    """Inside an unpacked Helm chart (a folder with Chart.yaml, e.g. the spec.charts directory), only its crds/
    folder holds plain CRDs: templates/ are Go templates, not YAML, and Helm installs crds/ before them. The NVIDIA
    charts keep every CRD there (tests/test_chart_crds.py reads the real ones); a chart's templates are skipped."""
    for parent in path.parents:
        if (parent / "Chart.yaml").is_file():
            return path.relative_to(parent).parts[0] == "crds"
        if parent == top:
            return True
    return True


def read_crd_dir(directory: Path, display: str, within: Path | None = None) -> list[Crd]:
    """Every CRD under `directory` (recursive, sorted); cached per directory content in this process. A file
    that resolves outside `within` (default: the directory itself; a cluster's spec.crds: the fleet) is refused
    before it is opened: a symbolic link in a pull request must not make CI read the runner's files."""
    if not directory.is_dir():
        raise InputError([Diagnostic(display, 0, "--crds", f"CRD directory '{directory}' does not exist",
                                     "pass a directory holding the operators' CRD YAML files")])
    files = sorted((p for p in directory.rglob("*") if p.suffix in YAML_SUFFIXES and p.is_file() and _crd_candidate(p, directory)),
                   key=lambda p: p.relative_to(directory).as_posix())
    limit = (within or directory).resolve()
    escaping = [p for p in files if not p.resolve().is_relative_to(limit)]
    if escaping:
        raise InputError([Diagnostic(os.path.join(display, p.relative_to(directory).as_posix()), 0, "(file)",
                                     f"is a symbolic link to a file outside {'the fleet directory' if within else display}",
                                     "copy the CRD file in instead of linking to it") for p in escaping])
    stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    key = (str(directory.resolve()), stamp)
    if key not in _cache:
        crds: list[Crd] = []
        for p in files:
            crds.extend(_read_file(p, os.path.join(display, p.relative_to(directory).as_posix())))
        _cache[key] = crds
    return _cache[key]


_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


def _in_version_dir(crd: Crd, version: str, exact: bool) -> bool:
    """Whether the CRD file sits under a directory named after `version` (v25.12.0, 25.12.0, 0.5.1...), or,
    not `exact`, after another release of its line (0.5.1 -> a v0.5.0/ directory): CRDs change between lines."""
    bare = version.removeprefix("v")
    line = _VERSION.match(bare)
    for part in Path(crd.file).parts[:-1]:
        # v25.12.0/, 25.12.0/, or a chart unpacked as <chart>-<version>/ (gpu-operator-v26.7.0/)
        if part.removeprefix("v") == bare or part.endswith((f"-{bare}", f"-v{bare}")):
            return True
        if not exact and line is not None:
            if any(m.groups() == line.groups() for m in _VERSION.finditer(part)):
                return True
    return False


def _choose(definitions: list[list[Crd]], version: str) -> Crd | None:
    """The one definition kept under the version's own directory, else under its line's; None if none or several."""
    for exact in (True, False):
        hits = [copies[0] for copies in definitions if any(_in_version_dir(c, version, exact) for c in copies)]
        if hits:
            return hits[0] if len(hits) == 1 else None
    return None


def build_catalog(layers: list[tuple[str, list[Crd]]], versions: dict[str, str] | None = None) -> CrdCatalog:
    """Index CRDs; an earlier layer shadows later ones. Different CRDs for one kind inside one layer (a
    tree holding several operator releases) are told apart by `versions` (API group -> the version of
    the operator this cluster runs for it): the CRD under a directory named after that version wins;
    without one, gpuc cannot know which the cluster runs, and looking that kind up is an input error."""
    by_kind: dict[tuple[str, str], Crd] = {}
    ambiguous: dict[tuple[str, str], InputError] = {}
    for _, crds in layers:
        level: dict[tuple[str, str], list[list[Crd]]] = {}  # kind -> its distinct definitions -> the files of each
        for crd in crds:
            same = level.setdefault((crd.group, crd.kind), [])
            twin = next((copies for copies in same if copies[0].same_definition(crd)), None)
            if twin is None:
                same.append([crd])
            else:
                twin.append(crd)
        for key, definitions in level.items():
            if key in by_kind or key in ambiguous:
                continue  # an earlier layer's
            found = [copies[0] for copies in definitions]
            if len(definitions) > 1:
                wanted = (versions or {}).get(key[0])
                chosen = _choose(definitions, wanted) if wanted else None
                if chosen is None:
                    first, second = found[0], found[1]
                    runs = f" (none under a directory named {wanted})" if wanted else ""
                    ambiguous[key] = InputError([Diagnostic(second.file, 0, second.label,
                                                 f"{len(found)} different CRDs define {second.kind}.{second.group}{runs}: "
                                                 f"{first.file} and {second.file}",
                                                 ("point --crds (or spec.crds) at the CRDs of the operator versions this cluster runs, one per "
                                                  "kind, or keep each release under a directory named after its version (e.g. v25.12.0/)")
                                                 if wanted else
                                                 ("give the cluster the operator's version (spec.gpuOperator.version, spec.draDriver.version, "
                                                  "spec.nimOperator.version) so gpuc picks the CRDs of that release's directory, or point "
                                                  "--crds (or spec.crds) at one release's CRDs"))])
                    continue
                found = [chosen]
            by_kind[key] = found[0]
    return CrdCatalog(by_kind, tuple(name for name, _ in layers), ambiguous)


@cache
def authored_crds() -> dict[tuple[str, str], Crd]:
    """The schemas gpuc knows without a CRD: the Argo CD Applications it writes (facts: argocd.yaml)."""
    fact = load_table("argocd")["application"]
    definitions = fact.get("definitions") or {}
    crd = Crd(fact["group"], fact["kind"], fact["plural"], fact["scope"],
              {fact["version"]: CrdVersion(fact["version"], True, fact["schema"])}, "gpuc's built-in Argo CD Application schema")
    node = Compiler(lambda ref: definitions[ref.rsplit("/", 1)[-1]], structural=True).compile(fact["schema"])
    node.skip = frozenset({"metadata", "apiVersion", "kind"})
    crd._nodes[fact["version"]] = node
    return {(crd.group, crd.kind): crd}
