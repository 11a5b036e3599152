"""Drift: the objects gpuc renders for the cluster against the ones it runs.

Only what gpuc writes is compared (labels, spec, data...): the API server adds defaults, status and
metadata, and a field the live object has in addition is not drift. Annotations are left out: Argo CD
and kubectl write their own there. A kind the state does not hold at all (an export of some kinds
only) says nothing: its objects are "not exported", not missing. Objects labelled as gpuc's that no
intent produces any more are reported too: an Argo CD sync with pruning deletes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...diagnostics import format_path
from ...load.state import covers
from ...lower.meta import MANAGED_BY
from .context import StatusContext, names

SKIPPED = ("apiVersion", "kind", "metadata", "status")


def differences(written: Any, live: Any, path: tuple = ()) -> Iterator[tuple]:
    """The paths where the live value no longer says what was written (see `covers`)."""
    if isinstance(written, dict) and isinstance(live, dict):
        for key, value in written.items():
            if key not in live:
                yield (*path, key)
            else:
                yield from differences(value, live[key], (*path, key))
    elif isinstance(written, list) and isinstance(live, list) and len(written) == len(live):
        for i, (a, b) in enumerate(zip(written, live)):
            yield from differences(a, b, (*path, i))
    elif not covers(written, live):
        yield path


def _compared(manifest: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in manifest.items() if k not in SKIPPED}
    labels = (manifest.get("metadata") or {}).get("labels")
    if labels:
        out["metadata"] = {"labels": labels}
    return out


def _value(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else doc[key] if isinstance(doc, list) and isinstance(key, int) and key < len(doc) else None
    return doc


def drift(ctx: StatusContext) -> None:
    rendered = set()
    unexported: set[str] = set()
    missing: list[str] = []
    absent: list[str] = []  # objects gpuc only patches (Nodes, a ClusterPolicy another tool installs): they must exist
    changed, same = 0, 0
    for obj in ctx.compiled.sorted_objects():
        group = obj.api_version.rpartition("/")[0]
        rendered.add((group, obj.kind, obj.namespace, obj.name))
        if not ctx.state.has(group, obj.kind):
            unexported.add(obj.kind)
            continue
        live = ctx.state.get(group, obj.kind, obj.namespace, obj.name)
        label = f"{obj.kind} {obj.namespace + '/' if obj.namespace else ''}{obj.name}"
        if live is None:
            (absent if obj.patch else missing).append(label)
            continue
        paths = list(differences(_compared(obj.manifest), live.raw))
        if not paths:
            same += 1
            continue
        changed += 1
        first = paths[0]
        shown = ", ".join(f"{format_path(p)}: {_value(live.raw, p)!r} (gpuc: {_value(obj.manifest, p)!r})" for p in paths[:3])
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        ctx.add("drift", "fail", f"{label} changed in the cluster: {shown}{more}",
                "sync the cluster's Argo CD application (or `pulumi up`); if the change is wanted, make it in the intent", live, first)
    if missing:
        ctx.add("drift", "fail", f"{len(missing)} object(s) gpuc renders are not in the cluster: {names(missing)}",
                "sync the cluster's Argo CD application (or `pulumi up`)")
    if absent:
        ctx.add("drift", "warn", f"{len(absent)} object(s) gpuc patches do not exist in the cluster: {names(absent)}",
                "a Node listed in nodePools[].nodeNames that is not in the cluster (renamed, scaled in): fix nodeNames; a "
                "ClusterPolicy: install the GPU Operator first (gpuOperator.mode patch patches an existing one)")
    orphans = [o for o in ctx.state.objects if (o.metadata.get("labels") or {}).get(MANAGED_BY) == "gpuc"
               and not o.metadata.get("ownerReferences") and o.key not in rendered]
    if orphans:
        ctx.add("drift", "warn", f"{len(orphans)} object(s) labelled {MANAGED_BY}=gpuc that no intent produces any more: "
                f"{names([o.label for o in orphans])}", "an Argo CD sync with prune deletes them; or delete them by hand", orphans[0])
    if same and not missing and not changed:
        ctx.add("drift", "ok", f"the {same} object(s) gpuc renders that the state holds match the cluster")
    if unexported:
        ctx.add("drift", "skip", f"not compared, the cluster state holds none of their kind: {', '.join(sorted(unexported))}",
                "export those kinds too (or read the cluster live with --kubeconfig)")
