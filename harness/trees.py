"""Applying a rendered cluster tree to a real API server as Argo CD would after the charts: the
CRDs and namespaces the charts bring, the objects partial patches land on, then every object with
server-side apply, dry run first; and reading back what was stored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .kube import Kube, Rejection, missing

NOT_OBJECTS = {"kustomization.yaml", "node-labels.yaml"}
SCALARS = {"string": str, "boolean": bool, "integer": int}  # OpenAPI scalar type -> the YAML value's type


def tree_objects(cluster_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(file, object) in sync-wave order, as Argo CD applies them. Argo CD Applications are left out: Argo CD's
    CRD cannot be fetched here (gpuc checks them against its own schema, compiler/facts/data/argocd.yaml)."""
    out = []
    for f in sorted(cluster_dir.glob("*.yaml")) + sorted((cluster_dir / "argocd").glob("*.yaml")):
        if f.name in NOT_OBJECTS:
            continue
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind") != "Application":
                out.append((str(f.relative_to(cluster_dir.parent)), doc))
    return out


def is_patch(obj: dict[str, Any]) -> bool:
    """A partial object (Node labels, a ClusterPolicy in gpuOperator.mode patch): gpuc patches what another owner made."""
    return obj["metadata"].get("annotations", {}).get("pulumi.com/patchForce") == "true"


def what_the_owner_made(obj: dict[str, Any], crd_files: Iterable[Path],
                        chart_values: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The object a patch lands on: a Node as a provisioner registers it; a custom resource as its operator's chart
    creates it: the sections its CRD requires, filled with the scalar settings the chart's values give each section
    (`chart_values`: kind -> the chart's values). Which fields the owner holds decides what a patch's removal leaves:
    relinquishing gpuc's fields of a section nobody else holds removes the section."""
    meta = {"name": obj["metadata"]["name"]}
    group, version = obj["apiVersion"].split("/") if "/" in obj["apiVersion"] else ("", obj["apiVersion"])
    for f in crd_files:
        for crd in yaml.safe_load_all(f.read_text()):
            if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition" and crd["spec"]["group"] == group \
                    and crd["spec"]["names"]["kind"] == obj["kind"]:
                schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
                spec_schema = schema["properties"].get("spec", {})
                spec: dict[str, Any] = {k: {} for k in spec_schema.get("required", [])}
                spec |= _chart_sections((chart_values or {}).get(obj["kind"], {}), spec_schema)
                return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "spec": spec}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta}


def _chart_sections(values: dict[str, Any], spec_schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each spec section the chart's values configure, with the values' scalar settings the CRD knows there."""
    out = {}
    for name, section in (spec_schema.get("properties") or {}).items():
        given = values.get(name)
        if isinstance(given, dict) and section.get("type") == "object":
            known = section.get("properties") or {}
            scalars = {k: v for k, v in given.items()
                       if k in known and v != "" and type(v) is SCALARS.get(known[k].get("type"))}
            if scalars:
                out[name] = scalars
    return out


def crd_files(crds: Iterable[Path]) -> list[Path]:
    return [f for p in crds for f in (sorted(p.rglob("*.yaml")) if p.is_dir() else [p])]


def prepare(kube: Kube, objects: list[tuple[str, dict[str, Any]]], crds: Iterable[Path], *, namespaces: bool = True,
            chart_values: Mapping[str, dict[str, Any]] | None = None) -> None:
    """What the charts and the other owners leave before gpuc's objects arrive: the CRDs, the objects partial
    patches land on (see what_the_owner_made) and (with `namespaces`) every namespace the objects live in; without
    it only those no object of the tree creates itself (a deployer that creates, rather than applies, needs them absent)."""
    files = crd_files(crds)
    kube.install_crds(files)
    own = {obj["metadata"]["name"] for _, obj in objects if obj["kind"] == "Namespace"}
    for _, obj in objects:
        ns = obj["metadata"].get("namespace")
        if ns and (namespaces or ns not in own):
            kube.ensure_namespace(ns)
        if is_patch(obj) and kube.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], ns) is None:
            kube.create(what_the_owner_made(obj, files, chart_values))


def apply_tree(kube: Kube, cluster_dir: Path, crds: Iterable[Path]) -> tuple[list[Rejection], list[str]]:
    """Apply every object of `cluster_dir` twice (dry run, then for real); (rejections, fields not stored as written)."""
    objects = tree_objects(cluster_dir)
    prepare(kube, objects, crds)
    rejected: list[Rejection] = []
    for _, obj in objects:
        for dry_run in (True, False):
            result = kube.apply(obj, dry_run=dry_run)
            if isinstance(result, Rejection):
                rejected.append(result)
    lost: list[str] = []
    for f, obj in objects:
        meta = obj["metadata"]
        stored = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        lost.extend(f"{f}: {m}" for m in missing(obj, stored or {}))
    return rejected, lost
