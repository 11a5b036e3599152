"""The running cluster as an input: what `kubectl get ... -o yaml` (or `-o json`) exported, or a live read.

An export is a `List` (kubectl's `-A -o yaml` of several kinds), a `<Kind>List`, a multi-document
stream of objects, or JSON; several files may be given, and `-` reads standard input. Every object
keeps where it came from, so a finding about it names file, line and field like a finding about an
intent. Kinds gpuc does not read (Pods, Events) are kept and ignored. The same object exported twice
(two overlapping exports) is kept once: the copy read last.

Small files go through the project's line-tracking YAML loader (duplicate keys refused, every line
known). An export of thousands of nodes is tens of megabytes, which that loader reads slowly, so
large files are read with libyaml or json and lines are looked up only if there is an error to show.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..diagnostics import Diagnostic, InputError, format_path
from .yaml_source import MAX_DEPTH, MAX_NODES, SourceDoc, check_nesting, decode, parse_documents

TRACKED_BYTES = 4 * 1024 * 1024  # above this, parse fast and find lines only when needed
MAX_BYTES = 1024 * 1024 * 1024
_ALIAS = re.compile(r"[\s\[{,:]\*[^\s,\]}]")  # a YAML alias (`*name`); the fast loaders would expand a bomb
STDIN = "-"
EXPORT_HINT = ("export the cluster with `kubectl get resourceslices,resourceclaims,deviceclasses,nodes -A -o yaml "
               "> state.yaml` (see `gpuc status --help` for every kind gpuc reads)")

Location = tuple[int, tuple]  # (document index, field path)


class StateFile:
    """The parsed documents of one export and, lazily, the line of any field."""

    def __init__(self, display: str, data: bytes, option: str = "--state") -> None:
        self.display = display
        self.option = option
        self.text = decode(data, display, MAX_BYTES)
        check_nesting(self.text, display)
        self._tracked: list[SourceDoc] | None = None
        if len(data) <= TRACKED_BYTES or _ALIAS.search(self.text):
            self._tracked = self._parse()
            self.documents = [d.value for d in self._tracked]
        else:
            self.documents = self._fast()

    @classmethod
    def read(cls, name: str, option: str = "--state", stdin: Any = None) -> StateFile:
        if name == STDIN:
            stream = stdin if stdin is not None else sys.stdin.buffer
            return cls("<stdin>", stream.read(), option)
        try:
            data = Path(name).read_bytes()
        except OSError as exc:
            raise InputError([Diagnostic(name, 0, option, f"cannot read the cluster state: {exc.strerror}", EXPORT_HINT)]) from None
        return cls(name, data, option)

    def _parse(self) -> list[SourceDoc]:
        # kubectl never writes anchors, so a real export has at most about one value per two bytes: a
        # budget of that size stops an alias bomb without limiting real files
        return parse_documents(self.text, self.display, max_nodes=max(MAX_NODES, len(self.text) // 2))

    def _fast(self) -> list[Any]:
        try:
            if self.text.lstrip().startswith("{"):
                documents = [json.loads(self.text)]
            else:
                documents = [d for d in yaml.load_all(self.text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d is not None]
        except (ValueError, yaml.YAMLError, RecursionError):
            documents = None
        if documents is None or _deeper_than(documents, MAX_DEPTH):
            # block-style nesting the text scan does not see: the tracked loader refuses it with the line
            self._tracked = self._parse()
            return [d.value for d in self._tracked]
        return documents

    @property
    def large(self) -> bool:
        return self._tracked is None

    def line(self, where: Location) -> int:
        if self._tracked is None:
            self._tracked = self._parse()
        doc, path = where
        return self._tracked[doc].line_of(path) if doc < len(self._tracked) else 0

    def diagnostic(self, where: Location, message: str, hint: str = "", severity: str = "error", cheap: bool = False) -> Diagnostic:
        line = 0 if cheap and self.large else self.line(where)
        return Diagnostic(self.display, line, format_path(where[1]), message, hint, severity)  # type: ignore[arg-type]


def _deeper_than(values: list[Any], limit: int) -> bool:
    """Whether any value nests more than `limit` levels (without recursion: the point is the deep ones)."""
    stack = [(v, 1) for v in values if isinstance(v, (dict, list))]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


@dataclass(frozen=True, eq=False)
class StateObject:
    """One object of the running cluster, as the API server returned it."""

    raw: dict[str, Any]
    file: StateFile | None  # None for a live read (no lines to point at)
    where: Location

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind"))

    @property
    def api_version(self) -> str:
        return str(self.raw.get("apiVersion"))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def name(self) -> str:
        return str(self.raw["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.raw["metadata"].get("namespace") or "")

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.group, self.kind, self.namespace, self.name)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.raw["metadata"]

    @property
    def status(self) -> dict[str, Any]:
        status = self.raw.get("status")
        return status if isinstance(status, dict) else {}

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.raw.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def label(self) -> str:
        """`Kind ns/name` as a person reads it."""
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"

    def diagnostic(self, message: str, hint: str = "", severity: str = "error", path: tuple = (), cheap: bool = True) -> Diagnostic:
        """A finding about this object (or a field of it), at its line in the export; `cheap` leaves the line
        out of large exports rather than parse them again (warnings), errors ask for it."""
        if self.file is None:
            return Diagnostic(f"(live) {self.label}", 0, format_path(path), message, hint, severity)  # type: ignore[arg-type]
        return self.file.diagnostic((self.where[0], self.where[1] + path), message, hint, severity, cheap=cheap)


@dataclass
class ClusterState:
    """Everything read of one running cluster, from exports or a live read."""

    objects: list[StateObject]
    sources: tuple[str, ...]  # the files read, or the live context
    # Kinds read whole (a live read lists every kind it reads): an object missing there is really missing.
    # An export says nothing of kinds it does not hold, so for it this is empty and absence is "not exported".
    complete: frozenset[tuple[str, str]] = frozenset()  # (group, kind)
    served: dict[str, tuple[str, ...]] | None = None  # API group -> versions served (live read)
    live: bool = False
    warnings: tuple[Diagnostic, ...] = ()  # what could not be read (a kind the credentials may not list)
    _by_kind: dict[tuple[str, str], list[StateObject]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        unique: dict[tuple[str, str, str, str], StateObject] = {}
        for obj in self.objects:
            unique.pop(obj.key, None)
            unique[obj.key] = obj
        self.objects = list(unique.values())
        self._by_kind = {}
        for obj in self.objects:
            self._by_kind.setdefault((obj.group, obj.kind), []).append(obj)

    @property
    def display(self) -> str:
        return ", ".join(self.sources)

    def of(self, group: str, kind: str) -> list[StateObject]:
        return self._by_kind.get((group, kind), [])

    def has(self, group: str, kind: str) -> bool:
        """Whether the state can say anything about this kind: read whole, or at least one object exported."""
        return (group, kind) in self.complete or bool(self.of(group, kind))

    def get(self, group: str, kind: str, namespace: str, name: str) -> StateObject | None:
        return next((o for o in self.of(group, kind) if o.namespace == namespace and o.name == name), None)


def covers(written: Any, live: Any) -> bool:
    """Whether a live object still says what was written: every field written has that value live. The
    API server adds defaults (inside list items too) and status, so only what was written is compared;
    lists must keep their length and order."""
    if isinstance(written, dict):
        return isinstance(live, dict) and all(k in live and covers(v, live[k]) for k, v in written.items())
    if isinstance(written, list):
        return isinstance(live, list) and len(written) == len(live) and all(covers(a, b) for a, b in zip(written, live))
    if isinstance(written, bool) or isinstance(live, bool):
        return written is live
    if isinstance(written, (int, float)) and isinstance(live, (int, float)):
        return written == live
    return str(written) == str(live) if written is not None and live is not None else written is live


LIST_KINDS = re.compile(r"(.+)?List$")


def _flatten(file: StateFile, problems: list[Diagnostic]) -> list[StateObject]:
    out: list[StateObject] = []
    for doc, value in enumerate(file.documents):
        if value is None:
            continue
        kind = value.get("kind") if isinstance(value, dict) else None
        if isinstance(kind, str) and LIST_KINDS.fullmatch(kind) and "items" in value:
            items = value.get("items")
            if items is None:
                continue  # an empty List: kubectl prints `items: []`, a hand-made one may leave it out
            if not isinstance(items, list):
                problems.append(file.diagnostic((doc, ("items",)), "a List needs an `items` list"))
                continue
            entries: Iterable[tuple[tuple, Any]] = ((("items", i), item) for i, item in enumerate(items))
        else:
            entries = [((), value)]
        for path, item in entries:
            obj = _object(file, (doc, path), item, problems)
            if obj is not None:
                out.append(obj)
    return out


def _object(file: StateFile, where: Location, item: Any, problems: list[Diagnostic]) -> StateObject | None:
    if not isinstance(item, dict):
        problems.append(file.diagnostic(where, f"expected a Kubernetes object (a mapping), got {type(item).__name__}", EXPORT_HINT))
        return None
    problem = malformed(item)
    if problem:
        problems.append(file.diagnostic(where, f"not a Kubernetes object: {problem}", EXPORT_HINT))
        return None
    obj = StateObject(item, file, where)
    wrong = mistyped(obj)
    problems.extend(wrong)
    return None if wrong else obj


def mistyped(obj: StateObject) -> list[Diagnostic]:
    """The fields of `obj` whose types are not the API's (state_shapes), each at its line."""
    from .state_shapes import shape_problems  # pydantic: imported by the compiler, which a render imports meanwhile

    return [obj.diagnostic(message, hint, path=path, cheap=False) for path, message, hint in shape_problems(obj.group, obj.kind, obj.raw)]


def malformed(item: dict[str, Any]) -> str:
    """What makes `item` something no API server returns ("" when nothing): the fields every reader of the state
    takes as given (the type, the name, labels and annotations as mappings)."""
    missing = [k for k in ("apiVersion", "kind") if not isinstance(item.get(k), str)]
    metadata = item.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return ", ".join([*missing, "metadata.name"]) + " missing"
    if missing:
        return f"{', '.join(missing)} missing"
    wrong = [f"metadata.{k} is a {type(metadata[k]).__name__}, not a mapping" for k in ("labels", "annotations")
             if metadata.get(k) is not None and not isinstance(metadata[k], dict)]
    return "; ".join(wrong)


def read_state(names: list[str], option: str = "--state", stdin: Any = None) -> ClusterState:
    """The cluster state the export files describe; InputError (exit 2) on a file that is not an export."""
    if names.count(STDIN) > 1:
        raise InputError([Diagnostic(STDIN, 0, option, "standard input can be read only once", "pass `-` once")])
    objects: list[StateObject] = []
    problems: list[Diagnostic] = []
    files = []
    for name in names:
        file = StateFile.read(name, option, stdin)
        files.append(file.display)
        found = _flatten(file, problems)
        if not found and not problems:
            problems.append(Diagnostic(file.display, 0, option, "the file holds no Kubernetes object", EXPORT_HINT))
        objects.extend(found)
    if problems:
        raise InputError(problems)
    return ClusterState(objects, tuple(files))
