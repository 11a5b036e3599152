"""Cluster-state exports exactly as `kubectl get ... -o yaml` / `-o json` prints them.

There is no cluster here, so the tests build what one would print: every object with the metadata the
API server adds (creationTimestamp, resourceVersion, uid, generation, managedFields), status where the
controllers write it, keys sorted (kubectl marshals through JSON maps), and several kinds wrapped in a
`v1 List` whose metadata carries an empty resourceVersion.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from itertools import count
from typing import Any

import yaml

_versions = count(48211)
STAMP = "2026-11-20T08:14:55Z"


def _uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def managed(manager: str, operation: str, api_version: str, fields: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
    entry = {"apiVersion": api_version, "fieldsType": "FieldsV1", "fieldsV1": fields, "manager": manager,
             "operation": operation, "time": STAMP}
    if subresource:
        entry["subresource"] = subresource
    return entry


def obj(api_version: str, kind: str, name: str, namespace: str | None = None, *, spec: dict | None = None,
        status: dict | None = None, labels: dict | None = None, annotations: dict | None = None,
        owners: list[dict] | None = None, manager: str = "argocd-controller", extra: dict | None = None) -> dict[str, Any]:
    """One object as the API server returns it."""
    metadata: dict[str, Any] = {"creationTimestamp": STAMP, "name": name, "resourceVersion": str(next(_versions)),
                                "uid": _uid(kind, namespace or "", name)}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owners:
        metadata["ownerReferences"] = owners
    fields: dict[str, Any] = {"f:metadata": {}}
    if spec is not None:
        metadata["generation"] = 1
        fields["f:spec"] = {}
    metadata["managedFields"] = [managed(manager, "Apply", api_version, fields)]
    if status is not None:
        metadata["managedFields"].append(managed(f"{kind.lower()}-controller", "Update", api_version, {"f:status": {}}, "status"))
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        out["spec"] = copy.deepcopy(spec)
    if status is not None:
        out["status"] = copy.deepcopy(status)
    out.update(extra or {})
    return out


def from_manifest(manifest: dict[str, Any], status: dict | None = None, **changes: Any) -> dict[str, Any]:
    """A rendered object as the cluster holds it after Argo CD applied it (plus server fields)."""
    m = manifest["metadata"]
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata", "spec", "status")}
    out = obj(manifest["apiVersion"], manifest["kind"], m["name"], m.get("namespace"), spec=manifest.get("spec"),
              status=status, labels=m.get("labels"), annotations=m.get("annotations"), extra=body)
    out.update(changes)
    return out


def node(name: str, labels: dict | None = None, allocatable: dict | None = None, taints: list | None = None) -> dict[str, Any]:
    resources = {"cpu": "192", "memory": "2113451520Ki", "pods": "110", **(allocatable or {})}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
    spec: dict[str, Any] = {"providerID": f"aws:///us-east-1a/i-{_uid(name)[:17].replace('-', '')}"}
    if taints:
        spec["taints"] = taints
    status = {"allocatable": resources, "capacity": resources,
              "conditions": [{"lastHeartbeatTime": STAMP, "lastTransitionTime": STAMP, "message": "kubelet is posting ready status",
                              "reason": "KubeletReady", "status": "True", "type": "Ready"}],
              "nodeInfo": {"containerRuntimeVersion": "containerd://2.1.4", "kubeletVersion": "v1.34.2", "operatingSystem": "linux",
                           "architecture": "amd64"}}
    return obj("v1", "Node", name, spec=spec, status=status, labels=labels, manager="kubelet")


def slices(inventory_list: dict[str, Any]) -> list[dict[str, Any]]:
    """The slices of `place.inventory.codec.inventory_list` as the API server holds them (owned by their node)."""
    out = []
    for item in inventory_list["items"]:
        spec = item["spec"]
        node_name = spec.get("nodeName")
        owners = [{"apiVersion": "v1", "controller": True, "kind": "Node", "name": node_name, "uid": _uid("Node", "", node_name)}] \
            if node_name else None
        out.append(obj(item["apiVersion"], "ResourceSlice", item["metadata"]["name"], spec=spec, owners=owners,
                       manager="gpu-kubelet-plugin"))
    return out


def allocated_claim(name: str, namespace: str, devices: list[tuple[str, str, str]], *, node_name: str | None = None,
                    pod: str | None = None, labels: dict | None = None, spec: dict | None = None,
                    annotations: dict | None = None, owners: list[dict] | None = None, request: str = "gpu",
                    api_version: str = "resource.k8s.io/v1") -> dict[str, Any]:
    """A ResourceClaim the scheduler allocated (and reserved for `pod`): `devices` are (driver, pool, device)."""
    spec = spec if spec is not None else {"devices": {"requests": [
        {"name": request, "exactly": {"allocationMode": "ExactCount", "count": len(devices), "deviceClassName": "gpu.nvidia.com"}}]}}
    status: dict[str, Any] = {"allocation": {"devices": {"results": [
        {"device": d, "driver": drv, "pool": pool, "request": request} for drv, pool, d in devices]}}}
    if node_name:
        status["allocation"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    if pod:
        status["reservedFor"] = [{"name": pod, "resource": "pods", "uid": _uid("Pod", namespace, pod)}]
    return obj(api_version, "ResourceClaim", name, namespace, spec=spec, status=status, labels=labels,
               annotations=annotations, owners=owners, manager="kube-controller-manager")


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def yaml_export(items: list[dict[str, Any]]) -> str:
    """`kubectl get a,b,c -A -o yaml`."""
    return yaml.safe_dump(as_list(items), sort_keys=True, default_flow_style=False)


def json_export(items: list[dict[str, Any]]) -> str:
    """`kubectl get a,b,c -A -o json`."""
    return json.dumps(as_list(items), indent=4, sort_keys=True) + "\n"


def stream_export(items: list[dict[str, Any]]) -> str:
    """Several `kubectl get x -o yaml` runs of single objects, joined as one multi-document stream."""
    return "".join("---\n" + yaml.safe_dump(i, sort_keys=True) for i in items)


class ApiServer:
    """A local HTTP server answering the Kubernetes API's discovery and list calls with `items`, so the live
    read runs the real Kubernetes Python client end to end: discovery, paging (`limit`/`continue`), label
    selectors, list items without apiVersion/kind as the server sends them, and 403 for `forbidden` plurals."""

    def __init__(self, items: list[dict[str, Any]], forbidden: tuple[str, ...] = (), page: int | None = None,
                 hostile: Callable[[list[str], dict[str, str]], tuple[int, bytes] | None] | None = None) -> None:
        """`hostile` may answer a request (path parts, query) itself, with any status and body, or hang (sleep)."""
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from compiler.facts.platform import state_kinds

        plural = {k.kind: k.plural for k in state_kinds()}
        self.requests: list[str] = []
        store: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for item in items:
            group, _, version = item["apiVersion"].rpartition("/")
            store.setdefault((group, version, plural.get(item["kind"], item["kind"].lower() + "s")), []).append(item)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                from urllib.parse import parse_qs, urlparse

                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                server.requests.append(self.path)
                parts = [p for p in url.path.split("/") if p]
                answer = hostile(parts, query) if hostile is not None else None
                if answer is not None:
                    self.send_response(answer[0])
                    self.send_header("Content-Length", str(len(answer[1])))
                    self.end_headers()
                    self.wfile.write(answer[1])
                    return
                if parts == ["apis"]:
                    groups: dict[str, list[str]] = {}
                    for group, version, _ in sorted(store):
                        if group and version not in groups.setdefault(group, []):
                            groups[group].append(version)
                    self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                        {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                         "preferredVersion": {"groupVersion": f"{g}/{vs[-1]}", "version": vs[-1]}} for g, vs in groups.items()]})
                    return
                if len(parts) == 3 and parts[0] == "api":
                    key = ("", parts[1], parts[2])
                elif len(parts) == 4 and parts[0] == "apis":
                    key = (parts[1], parts[2], parts[3])
                else:
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
                    return
                if key[2] in forbidden:
                    self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                                     "message": f'{key[2]} is forbidden: User "ci" cannot list resource "{key[2]}"'})
                    return
                if key not in store and not (key[0] == "" and key[2] in ("nodes", "namespaces", "configmaps")):
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
                    return
                found = store.get(key, [])
                if "labelSelector" in query:
                    name, _, value = query["labelSelector"].partition("=")
                    found = [i for i in found if (i["metadata"].get("labels") or {}).get(name) == value]
                start = int(query.get("continue") or 0)
                limit = min(int(query.get("limit") or len(found) or 1), page or 10**9)
                chunk = found[start:start + limit]
                more = start + limit < len(found)
                # the API server leaves apiVersion and kind off the items of a list
                listed = [{k: v for k, v in i.items() if k not in ("apiVersion", "kind")} for i in chunk]
                self._send(200, {"apiVersion": f"{key[0]}/{key[1]}" if key[0] else key[1], "kind": "List", "items": listed,
                                 "metadata": {"resourceVersion": "99999", **({"continue": str(start + limit)} if more else {})}})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig(self, path: Any, context: str = "ci") -> Any:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "local", "cluster": {"server": self.url}}],
            "users": [{"name": "ci", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": context, "context": {"cluster": "local", "user": "ci"}}]}))
        return path

    def __enter__(self) -> ApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def gh200_slice(node: str, product: str = "NVIDIA GH200 480GB") -> dict[str, Any]:
    """A node's slice with one GPU the catalog does not hold, as the driver publishes it."""
    device = {"name": "gpu-0", "attributes": {
        "productName": {"string": product}, "architecture": {"string": "Hopper"}, "type": {"string": "gpu"},
        "brand": {"string": "Nvidia"}, "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "570.124.6"},
        "uuid": {"string": f"GPU-{node}"}}, "capacity": {"memory": {"value": "97871Mi"}}}
    return obj("resource.k8s.io/v1", "ResourceSlice", f"{node}-gpu.nvidia.com-x1", manager="gpu-kubelet-plugin", spec={
        "driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [device]})
