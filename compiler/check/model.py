"""What the check stage passes around: the cluster being checked, its options, and findings.

A checker is a function `ClusterContext -> Iterable[Finding | Diagnostic]`. It reports problems in
the terms of the emitted object (kind, name, field path inside the manifest); `report.py` maps them
back to the intent that produced the object, so a checker never deals with source files itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..diagnostics import Diagnostic, Severity
from ..lower.graph import CompiledCluster, KubeObject
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


@dataclass
class ClusterContext:
    compiled: CompiledCluster
    crds: CrdCatalog
    options: CheckOptions = CheckOptions()
    # the tree rendered last time: a PreviousTree, or objects by identity (tests, --previous of another layout)
    previous: Any = field(default_factory=dict)
    rendered: dict[str, str] = field(default_factory=dict)  # file name -> text about to be written, when known
    inventory: Any = None  # the cluster's device inventory, when a caller already has it (see device_inventory)

    @property
    def cluster(self) -> ResolvedCluster:
        return self.compiled.cluster

    objects: list[KubeObject] = field(init=False)  # everything the tree holds: objects and Argo CD Applications

    def __post_init__(self) -> None:
        self.objects = self.compiled.sorted_objects() + sorted(self.compiled.gitops, key=KubeObject.sort_key)

    def device_inventory(self) -> Any:
        """The devices the cluster's DRA driver would publish (synthesized once, shared with the planner)."""
        if self.inventory is None:
            from ..place.inventory import synthesize_for
            from ..place.inventory.bulk import bulk_objects

            with bulk_objects():
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
