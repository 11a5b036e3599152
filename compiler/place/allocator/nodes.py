"""Which nodes a node-independent ResourceSlice (or device) serves: Kubernetes NodeSelector matching.

Synthesized slices are all bound to one node (`nodeName`); exported slices of network-attached
devices may use `allNodes` or a `nodeSelector` over node labels and `metadata.name`.
"""

from __future__ import annotations

from typing import Any

from ..inventory import NodeInfo

HOSTNAME = "kubernetes.io/hostname"


def _requirement(values: dict[str, str], req: dict[str, Any]) -> bool:
    key, op, wanted = req.get("key"), req.get("operator"), [str(v) for v in req.get("values") or []]
    present = key in values
    value = values.get(key) if isinstance(key, str) else None
    if op == "In":
        return present and value in wanted
    if op == "NotIn":
        return not present or value not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            a, b = int(value), int(wanted[0])  # type: ignore[arg-type]
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_matches(selector: dict[str, Any], node: NodeInfo) -> bool:
    """Terms are ORed; within a term every matchExpression (labels) and matchField (metadata.name) must hold."""
    labels = dict(node.labels)
    labels.setdefault(HOSTNAME, node.name)
    fields = {"metadata.name": node.name}
    for term in selector.get("nodeSelectorTerms") or []:
        exprs, matches = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not matches:
            continue  # an empty term matches nothing
        if all(_requirement(labels, r) for r in exprs) and all(_requirement(fields, r) for r in matches):
            return True
    return False
