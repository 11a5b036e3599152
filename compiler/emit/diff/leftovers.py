"""What a change deletes from the running cluster and what it leaves behind: Argo CD prunes what leaves the rendered
tree and, through the resources finalizer, everything a removed chart Application deployed; it never deletes a
CustomResourceDefinition, the namespace CreateNamespace made, or a Node gpuc patched (facts/data/argocd.yaml deletion).
"""

from __future__ import annotations

from ...lower.graph import CompiledCluster


def pruned(old: CompiledCluster, new: CompiledCluster) -> list[str]:
    """What the sync deletes: objects that leave the tree (old names of replaced objects included), and each removed
    release's objects with its Application."""
    now = {o.key for o in new.objects}
    out = [f"{o.kind} {o.namespace + '/' if o.namespace else ''}{o.name}" for o in old.sorted_objects()
           if o.key not in now and not o.patch]
    kept = {(r.namespace, r.name) for r in new.releases}
    out += [f"every object of release {r.namespace}/{r.name} (its Application {old.name}-{r.name} is deleted with them)"
            for r in old.releases if (r.namespace, r.name) not in kept]
    return out


def orphaned(old: CompiledCluster, new: CompiledCluster) -> list[str]:
    """What nothing deletes once the change is synced, and how to remove it by hand."""
    out = []
    kept = {(r.namespace, r.name) for r in new.releases}
    used = {r.namespace for r in new.releases} | {o.namespace for o in new.objects if o.namespace} | \
           {o.name for o in new.objects if o.kind == "Namespace"}
    for r in old.releases:
        if (r.namespace, r.name) in kept:
            continue
        if r.namespace not in used:
            out.append(f"namespace {r.namespace} of release {r.name} (Argo CD made it with CreateNamespace and never deletes it): "
                       f"`kubectl delete namespace {r.namespace}` once the release is gone")
        out.append(f"the CustomResourceDefinitions of chart {r.chart.name}, if it has any (Argo CD never deletes a CRD, so its "
                   "custom resources outlive the release): delete them by hand once nothing uses them")
    patched = {o.name: o.manifest["metadata"].get("labels") or {} for o in new.objects if o.kind == "Node"}
    for o in old.sorted_objects():
        if o.kind != "Node":
            continue
        labels = o.manifest["metadata"].get("labels") or {}
        left = sorted(k for k in labels if k not in patched.get(o.name, {}))
        if left and o.name not in patched:
            out.append(f"labels {', '.join(left)} on node {o.name} (gpuc's Node patches are never pruned): "
                       f"`kubectl label node {o.name} {' '.join(k + '-' for k in left)}`")
    for pool, labels in sorted(old.node_labels.items()):
        after = new.node_labels.get(pool)
        gone = sorted(k for k in labels if after is None or k not in after)
        named = any(p.name == pool and p.spec.node_names for p in old.cluster.pools)
        if gone and not named:
            out.append(f"labels {', '.join(gone)} on the nodes of pool {pool} (set by the node provisioner from node-labels.yaml): "
                       "remove them there")
    return out
