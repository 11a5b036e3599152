"""Every emitted object against the schema the cluster would use: built-in or from a CRD.

Built-in kinds use the official schemas of the cluster's Kubernetes version; custom resources use
the CRD the user pointed gpuc at, with its CEL rules (transition rules see the object as rendered
last time). The API server's other object-level refusals live here too: an API version the cluster
does not serve, a namespace on a cluster-scoped kind (or none on a namespaced one), a change to an
immutable field. Partial objects (server-side-apply patches) are not failed for missing required
fields: they are merged onto live objects gpuc never sees.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ..diagnostics import Diagnostic
from ..facts.platform import immutable_fields, object_meta_rules
from ..lower.graph import KubeObject
from .builtin import SchemasUnavailable, builtin_kinds, builtin_schema
from .cel_rules import CelRules
from .crds import authored_crds
from .model import UNCHANGED, ClusterContext, Finding, value_at
from .schema import MISSING, Node, validate


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _scope_findings(obj: KubeObject, namespaced: bool) -> Iterable[Finding]:
    has_namespace = bool(obj.namespace)
    if namespaced and not has_namespace:
        yield Finding(obj, ("metadata", "namespace"), f"{obj.kind} is namespaced: metadata.namespace is required",
                      "without it, Argo CD or kubectl would put it in whatever namespace they default to")
    elif not namespaced and has_namespace:
        yield Finding(obj, ("metadata", "namespace"), f"{obj.kind} is cluster-scoped: it takes no metadata.namespace",
                      "remove the namespace")


def _violations(obj: KubeObject, node: Node, old: Any, rules: CelRules | None, ctx: ClusterContext) -> Iterable[Finding]:
    for v in validate(node, obj.manifest, old, partial=obj.patch, rules=rules):
        severity, hint, path = v.severity, v.hint, v.path
        replaced = _replaced(obj, v.path) if v.transition and v.severity == "error" else None
        if replaced is not None:
            severity, hint = _replacement_outcome(obj, ctx)
            path = tuple(replaced.split("."))  # the rule may sit higher up (NIMService: on spec)
        yield Finding(obj, path, v.message, hint, severity)  # type: ignore[arg-type]


def _replaced(obj: KubeObject, path: tuple) -> str | None:
    """The field gpuc declares replaced (deleted and recreated) on change that a failed transition rule is about."""
    dotted = ".".join(str(p) for p in path)
    for r in obj.replacements:
        if dotted == r.path or r.path.startswith(dotted + ".") or dotted.startswith(r.path + "."):
            return r.path
    return None


def _replacement_outcome(obj: KubeObject, ctx: ClusterContext) -> tuple[str, str]:
    effect = "; ".join(r.effect for r in obj.replacements)
    where = f"{obj.kind} {obj.namespace + '/' if obj.namespace else ''}{obj.name}"
    pulumi = ("a Pulumi stack replaces it itself, with `pulumi up --skip-preview`: the Kubernetes provider's preview "
              "dry-runs the new object over the old one, which the CRD refuses")
    if ctx.options.allow_replace:
        return "warning", (f"accepted with --allow-replace: {effect}. Argo CD cannot do this in place: delete {where} "
                           f"before the sync ({pulumi})")
    return "error", (f"{effect}. To accept that, render again with --allow-replace, then delete {where} before "
                     f"Argo CD syncs ({pulumi})")


def _declared_replacements(obj: KubeObject, old: dict, ctx: ClusterContext) -> Iterable[Finding]:
    """A change to a field gpuc declares replaced on change (NIMService spec.draResources), judged
    without the CRD: the operator's admission rule will refuse the update all the same."""
    for r in obj.replacements:
        path = tuple(r.path.split("."))
        if value_at(obj.manifest, path, MISSING) != value_at(old, path, MISSING):
            severity, hint = _replacement_outcome(obj, ctx)
            yield Finding(obj, path, f"{r.path} is immutable: the {obj.kind} cannot be updated in place", hint, severity)  # type: ignore[arg-type]


def _immutable_changes(obj: KubeObject, old: dict) -> Iterable[Finding]:
    for dotted in immutable_fields().get(obj.kind, ()):
        path = tuple(dotted.split("."))
        new_value, old_value = value_at(obj.manifest, path, MISSING), value_at(old, path, MISSING)
        if old_value is not MISSING and new_value != old_value:
            yield Finding(obj, path, f"{dotted} is immutable: the API server refuses to change it on the existing {obj.kind}",
                          "gpuc names claims after a hash of their spec, so the same name with another spec means the "
                          "previous tree was edited by hand or comes from another gpuc version: delete the object first")


def _previous(ctx: ClusterContext, obj: KubeObject) -> Any:
    old = ctx.previous.old_version(obj)
    if old is UNCHANGED or old is None or old.get("apiVersion") != obj.api_version:
        return MISSING  # nothing changed, a new object, or one served at another version: no update to judge
    return old


def check_objects(ctx: ClusterContext) -> Iterable[Finding | Diagnostic]:
    minor = ctx.cluster.api.kubernetes
    try:
        served = builtin_kinds(minor)
    except SchemasUnavailable as exc:
        yield ctx.cluster.intent.error(("spec", "kubernetesVersion"), str(exc))
        return
    rules = CelRules()
    cluster_scoped = object_meta_rules().cluster_scoped
    unchecked: dict[tuple[str, str], list[KubeObject]] = defaultdict(list)
    for obj in ctx.objects:
        api, kind = obj.manifest.get("apiVersion"), obj.manifest.get("kind")
        if not isinstance(api, str) or not isinstance(kind, str):
            yield Finding(obj, (), "apiVersion and kind must be strings")
            continue
        group, version = _split(api)
        old = _previous(ctx, obj)
        if served.serves_group(group):
            node = builtin_schema(minor, group, version, kind)
            if node is None:
                versions = served.versions_of(group, kind)
                yield Finding(obj, ("apiVersion",),
                              f"Kubernetes {minor} does not serve {kind} in {api}"
                              + (f" (it serves {', '.join(f'{group}/{v}' if group else v for v in versions)})" if versions
                                 else f" (no {kind} in {group or 'the core group'})"),
                              "check spec.kubernetesVersion of the cluster")
                continue
            yield from _violations(obj, node, old, None, ctx)
            yield from _scope_findings(obj, namespaced=kind not in cluster_scoped)
            if old is not MISSING:
                yield from _immutable_changes(obj, old)
            continue
        crd = ctx.crds.find(group, kind) or authored_crds().get((group, kind))
        if crd is None:
            unchecked[(api, kind)].append(obj)
            if old is not MISSING:  # no CRD rule to judge the update, but gpuc knows its own immutable fields
                yield from _declared_replacements(obj, old, ctx)
            continue
        if version not in crd.served_versions:
            yield Finding(obj, ("apiVersion",), f"the {crd.label} CRD ({crd.file}) serves {', '.join(crd.served_versions) or 'no version'}, not {version}",
                          "the operator version this cluster runs does not know this API version")
            continue
        yield from _scope_findings(obj, namespaced=crd.scope == "Namespaced")
        node = crd.schema_node(version)
        if node is not None:
            yield from _violations(obj, node, old, rules, ctx)
    yield from _missing_crds(ctx, unchecked)


def _missing_crds(ctx: ClusterContext, unchecked: dict[tuple[str, str], list[KubeObject]]) -> Iterable[Diagnostic]:
    """One finding per cluster, on the cluster: users fix it by supplying CRDs (or accept it), not by editing workloads."""
    intent = ctx.cluster.intent
    spec = ctx.cluster.spec
    require = ctx.options.require_crds
    shown = {key: objs for key, objs in sorted(unchecked.items()) if require or not spec.acknowledged("unchecked-crds", key[1])}
    if not shown:
        return
    searched = f"in {', '.join(ctx.crds.searched)}" if ctx.crds.searched else "(no CRD directory given: spec.crds or --crds)"
    kinds = ", ".join(f"{kind} ({api})" for api, kind in shown)
    count = sum(len(objs) for objs in shown.values())
    message = f"no CRD for {kinds} {searched}: {count} object(s) {'cannot be checked' if require else 'were not checked against a schema'}"
    hint = "add the CRD YAML of the operator versions this cluster runs to spec.crds or pass --crds DIR (a tree of several releases " \
           "works when each sits under a directory named after its version)"
    if not require:
        hint += ("; --require-crds makes this an error; to accept it, spec.acknowledge: "
                 f"[{{warning: unchecked-crds, kinds: [{', '.join(kind for _, kind in shown)}], reason: ...}}]")
    finding = intent.source.error(("spec", "crds"), message, hint, severity="error" if require else "warning")
    yield finding if require else dataclasses.replace(finding, code="unchecked-crds")
