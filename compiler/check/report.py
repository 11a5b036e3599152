"""Findings about emitted objects, reported at the intent line a user has to change.

Every object remembers the intent document it came from (`KubeObject.origin`). The table below
says which intent field produced which part of each kind, so a bad selector points at
`spec.gpu.require`, a bad interval at `spec.gpu.timeSlicing`, a node label at the pool. Candidates
are tried in order and the first one the user actually wrote wins; a string value that appears
verbatim in that part of the intent (a `require.cel` expression, a node name) narrows it to the
exact line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..diagnostics import Diagnostic, format_path
from ..load.yaml_source import SourceDoc
from .model import Finding, value_at

Path = tuple[str | int, ...]

# (kind, object path pattern, intent path candidates). `*` matches one key or index; `{0}`, `{1}`
# in a candidate stand for what the wildcards matched. The longest matching pattern wins.
_CLAIM = (
    ("devices.requests[*].exactly.selectors", ("spec.gpu.require", "spec.gpu.mig.slices[{0}].profile", "spec.model", "spec.gpu")),
    ("devices.requests[*].selectors", ("spec.gpu.require", "spec.gpu.mig.slices[{0}].profile", "spec.model", "spec.gpu")),
    ("devices.requests[*].exactly.count", ("spec.gpu.mig.slices[{0}].count", "spec.gpu.count", "spec.gpu.fabric.partitionSize", "spec.model")),
    ("devices.requests[*].count", ("spec.gpu.mig.slices[{0}].count", "spec.gpu.count", "spec.gpu.fabric.partitionSize", "spec.model")),
    ("devices.requests[*].exactly.deviceClassName", ("spec.gpu.class", "spec.gpu.mig", "spec.gpu")),
    ("devices.requests[*].deviceClassName", ("spec.gpu.class", "spec.gpu.mig", "spec.gpu")),
    ("devices.requests[*]", ("spec.gpu.mig.slices[{0}]", "spec.gpu")),
    ("devices.requests", ("spec.gpu.mig.slices", "spec.gpu")),
    ("devices.constraints", ("spec.gpu.mig.sameGpu", "spec.gpu.fabric.partitionSize", "spec.gpu.mig", "spec.gpu")),
    ("devices.config[*].opaque.parameters.sharing.timeSlicingConfig", ("spec.gpu.timeSlicing", "spec.gpu.sharing")),
    ("devices.config[*].opaque.parameters.sharing.mpsConfig.defaultActiveThreadPercentage", ("spec.gpu.mps.activeThreadPercentage", "spec.gpu.mps")),
    ("devices.config[*].opaque.parameters.sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", ("spec.gpu.mps.pinnedMemoryLimit", "spec.gpu.mps")),
    ("devices.config[*].opaque.parameters.sharing.mpsConfig", ("spec.gpu.mps", "spec.gpu.sharing")),
    ("devices.config[*].opaque.parameters.sharing", ("spec.gpu.sharing", "spec.gpu")),
    ("devices.config[*].opaque.parameters.fabricTopologyConfig.partitionIds", ("spec.gpu.fabric.partitionIDs", "spec.gpu.fabric")),
    ("devices.config[*].opaque.parameters.fabricTopologyConfig.*", ("spec.gpu.fabric.{1}", "spec.gpu.fabric")),
    ("devices.config[*].opaque.parameters.fabricTopologyConfig", ("spec.gpu.fabric",)),
    ("devices.config", ("spec.gpu.sharing", "spec.gpu")),
)
_TABLE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    *(("ResourceClaim", "spec." + p, c) for p, c in _CLAIM),
    *(("ResourceClaimTemplate", "spec.spec." + p, c) for p, c in _CLAIM),
    ("ResourceClaim", "", ("spec.gpu.shareGroup", "spec.gpu")),
    ("ResourceClaimTemplate", "", ("spec.gpu",)),
    ("DeviceClass", "spec.selectors", ("spec.require", "spec.mig")),
    ("DeviceClass", "", ("spec", "metadata.name")),
    ("NIMCache", "spec.source.ngc.modelPuller", ("spec.model.image",)),
    ("NIMCache", "spec.source.ngc.authSecret", ("spec.secrets.ngcApiKey", "spec.secrets")),
    ("NIMCache", "spec.source.ngc.pullSecret", ("spec.secrets.imagePull", "spec.secrets")),
    ("NIMCache", "spec.source.ngc.model.tensorParallelism", ("spec.gpu.count", "spec.model.parameters", "spec.model")),
    ("NIMCache", "spec.source.ngc.model.*", ("spec.model.{0}", "spec.model")),
    ("NIMCache", "spec.storage.pvc.size", ("spec.cache.size", "spec.cache")),
    ("NIMCache", "spec.storage.pvc.storageClass", ("spec.cache.storageClass", "spec.cache")),
    ("NIMCache", "spec.storage.pvc.volumeAccessMode", ("spec.cache.accessMode", "spec.cache")),
    ("NIMCache", "spec.storage", ("spec.cache", "spec.model")),
    ("NIMCache", "", ("spec.model",)),
    ("NIMService", "spec.image", ("spec.model.image",)),
    ("NIMService", "spec.image.pullSecrets", ("spec.secrets.imagePull", "spec.secrets")),
    ("NIMService", "spec.authSecret", ("spec.secrets.ngcApiKey", "spec.secrets")),
    ("NIMService", "spec.replicas", ("spec.replicas", "spec.model")),
    ("NIMService", "spec.draResources", ("spec.gpu", "spec.model")),
    ("NIMService", "spec.expose.service.port", ("spec.expose.port", "spec.expose")),
    ("NIMService", "spec.expose.service.type", ("spec.expose.type", "spec.expose")),
    ("NIMService", "spec.expose", ("spec.expose", "spec.model")),
    ("NIMService", "spec.multiNode", ("spec.gpu.multiNode", "spec.gpu")),
    ("NIMService", "spec.storage", ("spec.cache", "spec.model")),
    ("NIMService", "", ("spec.model",)),
    ("ComputeDomain", "spec.numNodes", ("spec.gpu.multiNode.nodes", "spec.gpu.multiNode")),
    ("ComputeDomain", "", ("spec.gpu.multiNode", "spec.gpu")),
    ("Namespace", "", ("metadata.namespace",)),
    ("ConfigMap", "", ("spec.nodePools",)),
    ("Node", "", ("spec.nodePools",)),
    ("ClusterPolicy", "spec.mig", ("spec.nodePools",)),
    ("ClusterPolicy", "spec.migManager", ("spec.nodePools",)),
    ("ClusterPolicy", "", ("spec.gpuOperator",)),
    ("Application", "metadata.namespace", ("spec.gitops.namespace", "spec.gitops")),
    ("Application", "spec.project", ("spec.gitops.project", "spec.gitops")),
    ("Application", "spec.destination", ("spec.gitops.destination", "spec.gitops")),
    ("Application", "spec.source.repoURL", ("spec.gitops.repoURL", "spec.gitops")),
    ("Application", "spec.source.path", ("spec.gitops.path", "spec.gitops")),
    ("Application", "spec.source.targetRevision", ("spec.gitops.targetRevision", "spec.gitops")),
    ("Application", "spec.sources[*].repoURL", ("spec.gitops.repoURL", "spec.draDriver.version", "spec.gitops")),
    ("Application", "spec.sources[*].targetRevision", ("spec.draDriver.version", "spec.gitops.targetRevision", "spec.gitops")),
    ("Application", "", ("spec.gitops",)),
)

_PART = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")


def parse_path(text: str) -> Path:
    """`spec.gpu.mig.slices[0].profile` -> ("spec", "gpu", "mig", "slices", 0, "profile")."""
    out: list[str | int] = []
    for name, index in _PART.findall(text):
        if name:
            out.append(name)
        else:
            out.append("*" if index == "*" else int(index))
    return tuple(out)


@lru_cache(maxsize=None)
def _patterns(kind: str) -> tuple[tuple[Path, tuple[str, ...]], ...]:
    rows = [(parse_path(p), c) for k, p, c in _TABLE if k == kind]
    return tuple(sorted(rows, key=lambda r: -len(r[0])))


def _match(pattern: Path, path: Path) -> list[str | int] | None:
    if len(pattern) > len(path):
        return None
    captured: list[str | int] = []
    for want, got in zip(pattern, path):
        if want == "*":
            captured.append(got)
        elif want != got:
            return None
    return captured


def _exists(doc: SourceDoc, path: Path) -> bool:
    return path in doc.lines


def intent_path(kind: str, object_path: Path, origin: SourceDoc) -> Path:
    """The intent field that produced `object_path` of an object of `kind` (or the document itself)."""
    for pattern, candidates in _patterns(kind):
        captured = _match(pattern, object_path)
        if captured is None:
            continue
        paths = [parse_path(c.format(*captured)) for c in candidates]
        for path in paths:
            if _exists(origin, path):
                return path
        return paths[-1]
    return ()


def _find_string(value: Any, needle: str, path: Path) -> Path | None:
    if isinstance(value, str):
        return path if value == needle else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found = _find_string(child, needle, path + (key,))
        if found is not None:
            return found
    return None


def to_diagnostic(finding: Finding) -> Diagnostic:
    obj = finding.obj
    origin = obj.origin
    where = intent_path(obj.kind, finding.path, origin)
    value = value_at(obj.manifest, finding.path)
    if isinstance(value, str) and len(value) >= 3 and where:
        exact = _find_string(value_at(origin.value, where), value, where)
        if exact is not None:
            where = exact
    name = f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
    field = f" {format_path(finding.path)}" if finding.path else ""
    message = f"{obj.kind} {name}{field}: {finding.message}"
    return Diagnostic(origin.file, origin.line_of(where), format_path(where), message, finding.hint, finding.severity)
