"""Object metadata every emitted object shares: labels, provenance, sync wave, content-hashed names."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..facts.platform import replacement_rules
from ..load.yaml_source import SourceDoc
from .graph import KubeObject, Replacement, Wave

MANAGED_BY = "app.kubernetes.io/managed-by"
SOURCE = "gpuc.dev/source"
WORKLOAD = "gpuc.dev/workload"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
# A custom resource whose CRD a chart Application installs in the same first sync: without this, Argo
# CD's dry run fails on the missing kind and the whole sync stops before the CRD arrives.
MISSING_CRD_OK = "SkipDryRunOnMissingResource=true"
# A Namespace gpuc creates for workloads also holds what gpuc does not own (the NGC Secrets, users'
# pods): removing the last workload must not let Argo CD prune it with everything in it.
KEEP_NAMESPACE = "Prune=false"
# Partial objects (a ClusterPolicy another install owns, Node labels) are server-side-apply patches of
# fields gpuc means to own: take them over on conflict instead of failing. Argo CD's server-side
# apply sync forces its field ownership; Pulumi's Patch resources need this annotation to do the same.
PATCH_FORCE = {"pulumi.com/patchForce": "true"}


# Object path (dotted, "" for the whole object) -> the intent fields that produced it, most precise
# first (KubeObject.sources).
Sources = dict[str, tuple[str, ...]]


def prefixed(prefix: str, sources: Sources) -> Sources:
    """`sources` of a part placed at `prefix` inside an object."""
    return {(f"{prefix}.{k}" if k else prefix): v for k, v in sources.items()}


def content_hash(value: Any, length: int = 8) -> str:
    """Short stable hash of a JSON-able value: same content, same hash, on any machine."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def hashed_name(base: str, content: Any, max_length: int = 63) -> str:
    """`<base>-<hash>`: objects with immutable specs get a new name when their spec changes."""
    digest = content_hash(content)
    return f"{base[: max_length - len(digest) - 1].rstrip('-.')}-{digest}"


def make_object(
    api_version: str,
    kind: str,
    name: str,
    *,
    wave: Wave,
    component: str,
    origin: SourceDoc,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
    patch: bool = False,
    managed: bool = True,
    identity: str = "",
    sources: Sources | None = None,
) -> KubeObject:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    all_labels = dict(labels or {})
    if managed:
        all_labels[MANAGED_BY] = "gpuc"
    if all_labels:
        metadata["labels"] = dict(sorted(all_labels.items()))
    all_annotations = {SOURCE: origin.ref, SYNC_WAVE: str(int(wave)), **(annotations or {})}
    metadata["annotations"] = dict(sorted(all_annotations.items()))
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **(body or {})}
    return KubeObject(manifest, wave, component, origin, replacements_of(kind), patch, identity, sources or {})


def replacements_of(kind: str) -> tuple[Replacement, ...]:
    """The fields of `kind` that are replaced on change, not updated (facts: data/kubernetes.yaml)."""
    return tuple(Replacement(r.path, r.effect, r.delete_first) for r in replacement_rules().get(kind, ()))
