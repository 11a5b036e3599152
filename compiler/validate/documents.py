"""YAML documents -> typed intents, with pydantic's errors turned into file:line:field findings."""

from __future__ import annotations

import bisect
import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..diagnostics import Diagnostic, Findings, did_you_mean, format_path, one_of, tagged
from ..diagnostics import Path as FieldPath
from ..load.fleet import FleetFiles
from ..load.yaml_source import SourceDoc
from .intents import API_VERSION, KINDS, Cluster, GpuDeviceClass, GpuWorkload
from .secrets import scan_document

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Intent(Generic[T]):
    """A validated document together with where it came from."""

    model: T
    source: SourceDoc

    def error(self, path: FieldPath, message: str, hint: str = "") -> Diagnostic:
        return self.source.error(path, message, hint)

    def warning(self, path: FieldPath, message: str, hint: str = "") -> Diagnostic:
        return self.source.error(path, message, hint, severity="warning")

    @property
    def ref(self) -> str:
        return self.source.ref


@dataclass
class Fleet:
    root: Path
    clusters: dict[str, Intent[Cluster]] = field(default_factory=dict)
    workloads: list[Intent[GpuWorkload]] = field(default_factory=list)
    classes: dict[str, Intent[GpuDeviceClass]] = field(default_factory=dict)
    # documents that did not become an intent (invalid, or a name defined twice): the rest is still compiled
    # (validate.partial), and the namespaces their workloads would use are `incomplete` (no rule calls them unused)
    unvalidated: list[SourceDoc] = field(default_factory=list)
    incomplete: frozenset[str] = frozenset()
    _by_cluster: dict[str, list[Intent[GpuWorkload]]] | None = field(default=None, repr=False)
    _by_file: dict[str, tuple[list[int], list[Intent[Any]]]] | None = field(default=None, repr=False)

    def workloads_on(self, cluster: str) -> list[Intent[GpuWorkload]]:
        if self._by_cluster is None:  # built once: large fleets ask for every cluster
            self._by_cluster = {}
            for w in self.workloads:
                for name in target_clusters(w.model, self):
                    self._by_cluster.setdefault(name, []).append(w)
        return list(self._by_cluster.get(cluster, []))

    def document_at(self, file: str, line: int) -> Intent[Any] | None:
        """The workload or device class whose document holds `line` of `file` (its lines run up to where the next
        document of the file starts); None for a Cluster file, a line above the first document, or no file."""
        if self._by_file is None:
            by_file: dict[str, list[Intent[Any]]] = {}
            every: list[Intent[Any]] = [*self.workloads, *self.classes.values()]
            for intent in sorted(every, key=lambda i: i.source.start_line):
                by_file.setdefault(intent.source.file, []).append(intent)
            self._by_file = {f: ([i.source.start_line for i in docs], docs) for f, docs in by_file.items()}
        starts, intents = self._by_file.get(file, ([], []))
        at = bisect.bisect_right(starts, line) - 1
        return intents[at] if at >= 0 else None

    def targets_at(self, file: str, line: int) -> list[str] | None:
        """The clusters the workload whose document holds `line` of `file` targets; None when no workload's
        document holds it. A finding belongs to the clusters of the document it points into, not of its file:
        one file may hold workloads of many clusters."""
        found = self.document_at(file, line)
        return target_clusters(found.model, self) if found is not None and isinstance(found.model, GpuWorkload) else None

    def workloads_named(self, ref: str) -> list[Intent[GpuWorkload]]:
        """Workloads matching `namespace/name`, or a bare `name` (several namespaces may use it)."""
        return [w for w in self.workloads if ref in (w.model.metadata.name, f"{w.model.metadata.namespace}/{w.model.metadata.name}")]

    def workload(self, ref: str) -> Intent[GpuWorkload] | None:
        """The one workload `ref` names, or None when it names none or several."""
        found = self.workloads_named(ref)
        return found[0] if len(found) == 1 else None


def target_clusters(intent: GpuWorkload | GpuDeviceClass, fleet: Fleet) -> list[str]:
    """The clusters a workload or device class lists in spec.clusters, or every cluster of the fleet."""
    return list(intent.spec.clusters) if intent.spec.clusters is not None else sorted(fleet.clusters)


def _strip_union_tags(loc: tuple[Any, ...]) -> FieldPath:
    """pydantic puts union member names into error locations ('list[MigSlice]'); users never wrote those."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and p not in _TAGS and not p.startswith("function-")))


_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "literal['auto']"}


def _unwrap(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [x for a in typing.get_args(annotation) for x in _unwrap(a)]
    if origin in (list, tuple):
        return _unwrap(typing.get_args(annotation)[0])
    if origin is dict:
        return []
    return [annotation]


def _fields_at(model: type[BaseModel], path: FieldPath) -> list[str]:
    """Aliases allowed at `path` inside `model`, for "did you mean" suggestions."""
    candidates: list[Any] = [model]
    for part in path:
        if isinstance(part, int):
            continue
        nxt: list[Any] = []
        for c in candidates:
            if isinstance(c, type) and issubclass(c, BaseModel):
                for name, info in c.model_fields.items():
                    if (info.alias or name) == part:
                        nxt.extend(_unwrap(info.annotation))
        candidates = nxt
    names: list[str] = []
    for c in candidates:
        if isinstance(c, type) and issubclass(c, BaseModel):
            names.extend(info.alias or name for name, info in c.model_fields.items())
    return names


def _translate(error: dict, doc: SourceDoc, model: type[BaseModel]) -> Diagnostic:
    path = _strip_union_tags(error["loc"])
    kind = error["type"]
    hint = ""
    if kind == "extra_forbidden":
        field_name = str(path[-1])
        allowed = _fields_at(model, path[:-1])
        message = f"unknown field '{field_name}'"
        hint = did_you_mean(field_name, allowed) or (f"allowed fields here: {', '.join(sorted(allowed))}" if allowed else "")
    elif kind == "missing":
        message = f"required field '{path[-1]}' is missing"
    elif kind in ("literal_error", "enum"):
        expected = error.get("ctx", {}).get("expected", "")
        got = error.get("input")
        message = f"must be one of {expected}; got {got!r}"
        choices = [c.strip().strip("'") for c in expected.replace(" or ", ",").split(",") if c.strip()]
        if isinstance(got, str):
            hint = did_you_mean(got, choices)
    elif kind in ("value_error", "assertion_error"):
        message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    elif kind == "model_type" or kind == "dict_type":
        message = f"must be a mapping, got {type(error.get('input')).__name__}"
    elif kind == "list_type":
        message = f"must be a list, got {type(error.get('input')).__name__}"
        if isinstance(error.get("input"), (str, int)):
            hint = f"write it as a list: [{error.get('input')}]"
    else:
        message = str(error["msg"])[0].lower() + str(error["msg"])[1:]
        if "input" in error and not isinstance(error["input"], (dict, list)):
            message += f", got {error['input']!r}"
        hint = _value_hint(kind, error.get("input"))
    return doc.error(path, message, hint)


def _value_hint(kind: str, got: object) -> str:
    """The fix for a value of the wrong type, from what YAML made of what the user typed."""
    if isinstance(got, bool) and kind in ("int_type", "float_type"):
        return "write a number: YAML read this value as a boolean"
    if isinstance(got, bool):
        return "YAML reads true/false, yes/no and on/off as booleans: quote the value if you meant text"
    if kind in ("int_type", "float_type") and isinstance(got, str):
        return "write the number without quotes" if got.strip().lstrip("-").replace(".", "", 1).isdigit() else "a number is expected here"
    if kind == "string_type" and isinstance(got, (int, float)):
        return f"quote it if you meant the text: '{got}'"
    if kind == "too_short":
        return "give at least one item, or leave the field out"
    return ""


def _validate(doc: SourceDoc, model: type[T], findings: Findings) -> T | None:
    try:
        return model.model_validate(doc.value)
    except ValidationError as exc:
        seen: set[str] = set()
        for err in exc.errors():
            d = _translate(dict(err), doc, model)
            if d.path not in seen:  # a union reports one error per member; the first is enough
                seen.add(d.path)
                findings.add(d)
        return None


def _header(doc: SourceDoc, allowed: tuple[str, ...], where: str, findings: Findings) -> str | None:
    value = doc.value
    if not isinstance(value, dict):
        found = "a list" if isinstance(value, list) else f"a {type(value).__name__}"
        findings.add(doc.error((), f"document is {found}; expected a mapping with apiVersion, kind, metadata and spec",
                               "remove a leading '- ' if the document was written as a list item"))
        return None
    api, kind = value.get("apiVersion"), value.get("kind")
    if api != API_VERSION:
        findings.add(doc.error(("apiVersion",), f"apiVersion must be '{API_VERSION}', got {api!r}",
                               f"set `apiVersion: {API_VERSION}`"))
        return None
    if kind not in allowed:
        suggestion = did_you_mean(str(kind), allowed)
        elsewhere = isinstance(kind, str) and kind in KINDS and kind not in allowed
        hint = (f"{kind} documents belong in {'clusters/' if kind == 'Cluster' else 'workloads/'}" if elsewhere
                else suggestion or f"{where} holds {one_of(allowed)}")
        findings.add(doc.error(("kind",), f"kind {kind!r} is not allowed in {where}", hint))
        return None
    return kind


WORKLOAD_KINDS = ("GpuWorkload", "GpuDeviceClass")
# Namespaces every cluster has and gpuc never creates (nor labels).
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
_MODELS: dict[str, type[BaseModel]] = {"Cluster": Cluster, "GpuWorkload": GpuWorkload, "GpuDeviceClass": GpuDeviceClass}


@dataclass
class CheckedDocument:
    """What one document shows on its own: its kind and typed model (None when invalid), its findings,
    and the credential-looking values in it (to redact from every message)."""

    kind: str | None
    model: Any
    findings: list[Diagnostic]
    secrets: set[str]


def check_document(doc: SourceDoc, allowed: tuple[str, ...], where: str) -> CheckedDocument:
    findings = Findings()
    found, secrets = scan_document(doc)
    findings.extend(tagged(found, "secrets"))
    kind = _header(doc, allowed, where, findings)
    model = _validate(doc, _MODELS[kind], findings) if kind is not None else None
    findings.tag_since(0, "schema")
    return CheckedDocument(kind, model, findings.all(), secrets)


class DocumentChecks:
    """check_document for workload documents, run as each is read (a load_fleet read-along) so that it
    overlaps the parsing of the next files; build_fleet then takes the results instead of redoing them."""

    def __init__(self) -> None:
        self._done: dict[int, tuple[SourceDoc, CheckedDocument]] = {}

    def __call__(self, doc: SourceDoc) -> None:
        self._done[id(doc)] = (doc, check_document(doc, WORKLOAD_KINDS, "workloads/"))  # the doc keeps its id unique

    def result(self, doc: SourceDoc) -> CheckedDocument | None:
        found = self._done.get(id(doc))
        return found[1] if found is not None and found[0] is doc else None


def build_fleet(files: FleetFiles, findings: Findings,
                checked_early: Callable[[SourceDoc], CheckedDocument | None] | None = None) -> Fleet:
    """Validate every document; collect every error rather than stopping at the first.
    `checked_early` has the results of documents already checked (DocumentChecks.result)."""
    fleet = Fleet(files.root)
    first_seen: dict[tuple[str, str], SourceDoc] = {}

    def register(key: tuple[str, str], doc: SourceDoc) -> bool:
        if key in first_seen:
            other = first_seen[key]
            where = f"{other.file}:{other.line_of(('metadata', 'name'))}"
            findings.add(dataclasses.replace(doc.error(("metadata", "name"), f"duplicate {key[0]} '{key[1]}' (also defined at {where})",
                                                       "names must be unique in the fleet; rename one of them"), rule="names"))
            return False
        first_seen[key] = doc
        return True

    secrets: set[str] = set()

    def checked(doc: SourceDoc, allowed: tuple[str, ...], where: str) -> CheckedDocument:
        result = (checked_early(doc) if checked_early is not None else None) or check_document(doc, allowed, where)
        findings.extend(result.findings)
        secrets.update(result.secrets)
        return result

    for doc in files.clusters:
        if (c := checked(doc, ("Cluster",), "clusters/").model) is not None and register(("Cluster", c.metadata.name), doc):
            fleet.clusters[c.metadata.name] = Intent(c, doc)
        else:
            fleet.unvalidated.append(doc)
    for doc in files.workloads:
        result = checked(doc, WORKLOAD_KINDS, "workloads/")
        if result.kind == "GpuWorkload" and (w := result.model) is not None \
                and register(("GpuWorkload", f"{w.metadata.namespace}/{w.metadata.name}"), doc):
            fleet.workloads.append(Intent(w, doc))
        elif result.kind == "GpuDeviceClass" and (k := result.model) is not None and register(("GpuDeviceClass", k.metadata.name), doc):
            fleet.classes[k.metadata.name] = Intent(k, doc)
        else:
            fleet.unvalidated.append(doc)
    findings.redact(secrets)
    fleet.clusters = dict(sorted(fleet.clusters.items()))
    fleet.classes = dict(sorted(fleet.classes.items()))
    fleet.workloads.sort(key=lambda w: (w.model.metadata.namespace, w.model.metadata.name))
    return fleet


__all__ = ["CheckedDocument", "DocumentChecks", "Fleet", "Intent", "build_fleet", "check_document", "target_clusters", "format_path"]
