"""What the check stage passes around: the cluster being checked, its options, and findings.

A checker is a function `ClusterContext -> Iterable[Finding | Diagnostic]`. It reports problems in
the terms of the emitted object (kind, name, field path inside the manifest); `report.py` maps them
back to the intent that produced the object, so a checker never deals with source files itself.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ..diagnostics import Diagnostic, Severity
from ..lower.graph import CompiledCluster, KubeObject
from ..place import Inventory, synthesize_for
from ..validate.resolved import ResolvedCluster
from .crds import CrdCatalog


@dataclass(frozen=True)
class CheckOptions:
    crds: tuple[Path, ...] = ()  # --crds directories, searched after the cluster's own spec.crds
    require_crds: bool = False  # a custom resource kind without a CRD is an error, not a warning
    allow_replace: bool = False  # accept changes to immutable fields of objects gpuc knows how to replace


@dataclass(frozen=True)
class Finding:
    obj: KubeObject
    path: tuple[str | int, ...]  # field path inside obj.manifest
    message: str
    hint: str = ""
    severity: Severity = "error"


ObjectKey = tuple[str, str, str, str]  # (group, kind, namespace, name): identity across API versions


def object_key(manifest: dict[str, Any]) -> ObjectKey | None:
    """Identity of a manifest as the API server sees it, or None when the manifest is too broken to have one."""
    api, kind, meta = manifest.get("apiVersion"), manifest.get("kind"), manifest.get("metadata")
    if not isinstance(api, str) or not isinstance(kind, str) or not isinstance(meta, dict):
        return None
    group = api.rpartition("/")[0]
    return (group, kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class _Previous(enum.Enum):
    UNCHANGED = "unchanged"


UNCHANGED = _Previous.UNCHANGED  # the previous version is byte for byte what is about to be applied
OldVersion = dict[str, Any] | None | Literal[_Previous.UNCHANGED]


class PreviousObjects(Protocol):
    """What the cluster was given last time, for judging updates (`oldSelf`, immutable fields). The
    rendered tree (emit.previous.PreviousTree) is one; the check stage never reads files itself."""

    def old_version(self, obj: KubeObject) -> OldVersion:
        """The previous manifest of `obj`, UNCHANGED, or None when it did not exist."""
        ...


@dataclass(frozen=True)
class PreviousByKey:
    """Previous objects by identity (object_key), wherever they came from."""

    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)

    def old_version(self, obj: KubeObject) -> OldVersion:
        key = object_key(obj.manifest)
        return self.objects.get(key) if key is not None else None


NO_PREVIOUS = PreviousByKey()


@dataclass
class ClusterContext:
    compiled: CompiledCluster
    crds: CrdCatalog
    options: CheckOptions = CheckOptions()
    previous: PreviousObjects = NO_PREVIOUS
    inventory: Inventory | None = None  # the devices the cluster publishes, when a caller already has them

    @property
    def cluster(self) -> ResolvedCluster:
        return self.compiled.cluster

    objects: list[KubeObject] = field(init=False)  # everything the tree holds: objects and Argo CD Applications

    def __post_init__(self) -> None:
        self.objects = self.compiled.sorted_objects() + sorted(self.compiled.gitops, key=KubeObject.sort_key)

    def device_inventory(self) -> Inventory:
        """The devices selectors are judged against: the pipeline's (synthesized or the cluster's real
        ResourceSlices, shared with placement), else synthesized here once."""
        if self.inventory is None:
            self.inventory = synthesize_for(self.compiled)
        return self.inventory


def as_list(value: Any) -> list:
    """`value` if it is a list, else []: checkers read manifests that may be malformed anywhere."""
    return value if isinstance(value, list) else []


def value_at(value: Any, path: tuple, default: Any = None) -> Any:
    """The value at `path` (keys and list indexes) inside `value`, or `default` when it is not there."""
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return default
    return value


Checker = Callable[[ClusterContext], Iterable[Finding | Diagnostic]]
