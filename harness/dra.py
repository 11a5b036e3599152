"""resource.k8s.io objects in the shapes the real components take: everything as v1 for the allocator
library (which speaks only v1), and claims with the allocation results a scheduler would write."""

from __future__ import annotations

import copy
import uuid
from typing import Any

Obj = dict[str, Any]

_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")


def request_to_v1(request: Obj) -> Obj:
    """A v1beta1 request (fields inline) as v1 (`exactly`); v1beta2 and v1 requests are already v1-shaped."""
    if "exactly" in request or "firstAvailable" in request:
        return request
    out = {"name": request["name"]}
    exact = {k: request[k] for k in _EXACT_FIELDS if k in request}
    if request.get("firstAvailable"):
        out["firstAvailable"] = request["firstAvailable"]
    else:
        out["exactly"] = exact
    return out


def claim_spec_to_v1(spec: Obj) -> Obj:
    spec = copy.deepcopy(spec)
    devices = spec.get("devices") or {}
    devices["requests"] = [request_to_v1(r) for r in devices.get("requests") or []]
    spec["devices"] = devices
    return spec


def slice_to_v1(obj: Obj) -> Obj:
    """A ResourceSlice of any served version as v1: v1beta1 nests a device's fields under `basic`."""
    obj = copy.deepcopy(obj)
    obj["apiVersion"] = "resource.k8s.io/v1"
    spec = obj["spec"]
    spec["devices"] = [({"name": d["name"], **d["basic"]} if "basic" in d else d) for d in spec.get("devices") or []]
    return obj


def claim(namespace: str, name: str, spec: Obj) -> Obj:
    """A ResourceClaim object as the API server stores it (v1, a UID of its own)."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}"))},
        "spec": claim_spec_to_v1(spec),
    }


def allocated(claim_obj: Obj, results: list[Obj], node: str) -> Obj:
    """`claim_obj` with status.allocation holding `results` on `node`: the state the next pod meets."""
    out = copy.deepcopy(claim_obj)
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    out["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": selector}}
    return out


def node(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}}
