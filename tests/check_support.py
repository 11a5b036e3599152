"""Helpers for the check-stage tests: the example fleet compiled once, one defect seeded per test."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, REFERENCE

NIM_CRDS = REFERENCE / "nim-operator"
GPU_OPERATOR_CRDS = REFERENCE / "gpu-operator"
DRA_CRDS = REFERENCE / "nvidia-dra-driver-gpu"


def reference_crds(driver: str = "v25.12.0") -> tuple[Path, ...]:
    """The CRDs of the operators the example fleet's prod-east runs."""
    return (NIM_CRDS, GPU_OPERATOR_CRDS, DRA_CRDS / driver / "crds")


def crd_args(driver: str = "v25.12.0") -> list[str]:
    return [a for d in reference_crds(driver) for a in ("--crds", str(d))]


@cache
def _examples():
    from compiler.pipeline import compile_fleet

    return compile_fleet(EXAMPLES)


def damageable(compiled):
    """A copy of a compiled cluster whose manifests and release values may be changed freely."""
    def objects(items):
        return [dataclasses.replace(o, manifest=copy.deepcopy(o.manifest)) for o in items]

    return dataclasses.replace(compiled, objects=objects(compiled.objects), gitops=objects(compiled.gitops),
                               releases=[dataclasses.replace(r, values=copy.deepcopy(r.values)) for r in compiled.releases],
                               driver_values=copy.deepcopy(compiled.driver_values))


def example_cluster(name: str):
    """A private copy of one compiled example cluster, safe to damage."""
    return damageable(_examples().compiled[name])


def find(compiled, kind: str, name_part: str = ""):
    return next(o for o in compiled.objects + compiled.gitops if o.kind == kind and name_part in o.name)


def run_checks(compiled, *, crds: tuple[Path, ...] | None = None, previous: dict | None = None,
               fleet_root: Path = EXAMPLES, **options: Any):
    """Diagnostics of every checker for one compiled cluster."""
    from compiler.check.model import CheckOptions, ClusterContext, PreviousByKey
    from compiler.check.run import check_cluster, cluster_catalog

    opts = CheckOptions(reference_crds() if crds is None else crds, **options)
    ctx = ClusterContext(compiled, cluster_catalog(compiled, fleet_root, opts), opts, PreviousByKey(previous or {}))
    return check_cluster(ctx)


def errors_after(cluster: str, damage: Callable[[Any], None], **kwargs: Any):
    compiled = example_cluster(cluster)
    damage(compiled)
    return [d for d in run_checks(compiled, **kwargs) if d.severity == "error"]


def previous_of(compiled) -> dict:
    from compiler.check.model import object_key

    return {object_key(o.manifest): copy.deepcopy(o.manifest) for o in compiled.objects + compiled.gitops}


def claim_devices(obj) -> dict:
    spec = obj.manifest["spec"]
    return spec["spec"]["devices"] if obj.kind == "ResourceClaimTemplate" else spec["devices"]


def json_values(max_int: int = 2**40):
    """Any JSON value a damaged manifest might hold (hypothesis strategy)."""
    from hypothesis import strategies as st

    return st.recursive(
        st.none() | st.booleans() | st.integers(-max_int, max_int) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=6)


def manifest_paths(value, path=()):
    """Every path into a manifest, the manifest itself first."""
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from manifest_paths(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from manifest_paths(child, path + (i,))


def damage(manifest: dict, path: tuple, value: Any, delete: bool) -> None:
    """Replace (or, inside a mapping, delete) the value at `path` of `manifest`."""
    parent = manifest
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
