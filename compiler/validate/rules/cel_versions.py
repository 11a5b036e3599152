"""Selectors the cluster's API server cannot compile: gpuc writes `semver()` for minDriverVersion and
minComputeCapability, and Kubernetes accepts that function in a new selector only from 1.34 (facts:
kubernetes.yaml `celFunctionsInNewSelectors`). Without this rule the DeviceClass or claim renders, passes
gpuc's own CEL checks, and is refused by the API server at sync."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...diagnostics import Findings
from ...facts.platform import cel_function_since
from ..documents import Fleet, Intent, target_clusters
from ..resolved import ResolvedCluster

_SEMVER_FIELDS = (("minDriverVersion", "min_driver_version"), ("minComputeCapability", "min_compute_capability"))


def _requires(intent: Intent[Any]) -> Iterator[tuple[tuple, Any]]:
    """(path, Require) of every `require` an intent carries."""
    spec = intent.model.spec
    if intent.model.kind == "GpuDeviceClass":
        yield ("spec", "require"), spec.require
        return
    yield ("spec", "gpu", "require"), spec.gpu.require
    for i, alt in enumerate(spec.gpu.alternatives or []):
        yield ("spec", "gpu", "alternatives", i, "require"), alt.require


def _semver_uses(require: Any) -> Iterator[tuple[tuple, str]]:
    if require is None:
        return
    for name, attr in _SEMVER_FIELDS:
        if getattr(require, attr, None):
            yield (name,), f"{name} compiles to a selector calling semver()"
    for i, expr in enumerate(require.cel or []):
        if "semver(" in expr:
            yield ("cel", i), "this selector calls semver()"


def check_cel_versions(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    since = cel_function_since("semver")
    old = {name: c for name, c in clusters.items() if c.api.minor < since}
    if not old:
        return
    intents: list[Intent[Any]] = [*fleet.workloads, *fleet.classes.values()]
    for intent in intents:
        names = [n for n in target_clusters(intent.model, fleet) if n in old]
        if not names:
            continue
        for path, require in _requires(intent):
            for field, what in _semver_uses(require):
                findings.add(intent.error(path + field, f"{what}, which the API server of Kubernetes "
                                          f"{', '.join(sorted(old[n].api.kubernetes for n in names))} (cluster "
                                          f"{', '.join(sorted(names))}) refuses in a new selector: it arrives in 1.{since}",
                                          "drop it for these clusters (select the GPU by productName or architecture), "
                                          f"or upgrade them to Kubernetes 1.{since}"))
