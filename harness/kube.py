"""Talking to the harness's API server the way Argo CD and kubectl do: server-side apply, with and
without --dry-run=server, through the official Kubernetes client's dynamic API."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ApiException, NotFoundError, ResourceNotFoundError

from .controlplane import ADMIN_TOKEN, ControlPlane

Obj = dict[str, Any]
FIELD_MANAGER = "gpuc-harness"


@dataclass(frozen=True)
class Rejection:
    """What the API server answered when it refused an object."""

    kind: str
    name: str
    status: int
    message: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: HTTP {self.status}: {self.message}"


class Kube:
    def __init__(self, cp: ControlPlane, token: str = ADMIN_TOKEN, user: str = "admin") -> None:
        api = k8s_config.new_client_from_config(str(cp.kubeconfig(token, user)))
        self.api = api
        self.dyn = DynamicClient(api)

    def resource(self, api_version: str, kind: str):
        try:
            return self.dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            self.dyn.resources.invalidate_cache()  # a CRD installed since the last discovery
            return self.dyn.resources.get(api_version=api_version, kind=kind)

    def preferred(self, group: str) -> str:
        """The version of `group` the API server prefers now ("resource.k8s.io/v1"): the one every minor serves it in
        (1.33 serves resource.k8s.io at v1beta2 only)."""
        for g in k8s.ApisApi(self.api).get_api_versions().groups:
            if g.name == group and g.preferred_version is not None:
                return str(g.preferred_version.group_version)
        raise LookupError(f"the API server serves no {group}")

    def apply(self, obj: Obj, *, dry_run: bool = False) -> Obj | Rejection:
        """Server-side apply `obj` (forcing field ownership, as Argo CD's ServerSideApply sync does)."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj.get("metadata", {})
        name = f"{meta.get('namespace', '')}/{meta.get('name')}".lstrip("/")
        try:
            out = self.dyn.server_side_apply(res, body=obj, namespace=meta.get("namespace"), field_manager=FIELD_MANAGER,
                                             force_conflicts=True, dry_run="All" if dry_run else None)
        except ApiException as exc:
            return Rejection(obj["kind"], name, int(exc.status or 0), _message(exc))
        return out.to_dict()

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        try:
            return self.dyn.get(self.resource(api_version, kind), name=name, namespace=namespace).to_dict()
        except NotFoundError:
            return None

    def create(self, obj: Obj) -> Obj:
        res = self.resource(obj["apiVersion"], obj["kind"])
        return self.dyn.create(res, body=obj, namespace=obj.get("metadata", {}).get("namespace")).to_dict()

    def set_status(self, obj: Obj) -> Obj:
        """Write `obj`'s status through the status subresource (what a kubelet or a scheduler would)."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        current = self.dyn.get(res, name=meta["name"], namespace=meta.get("namespace")).to_dict()
        current["status"] = obj["status"]
        path = res.path(name=meta["name"], namespace=meta.get("namespace")) + "/status"
        return self.dyn.request("put", path, body=current).to_dict()

    def items(self, api_version: str, kind: str, namespace: str | None = None) -> list[Obj]:
        return [i.to_dict() for i in self.dyn.get(self.resource(api_version, kind), namespace=namespace).items]

    def ensure_namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def install_crds(self, paths: Iterable[Path]) -> list[str]:
        """Apply the CRDs in `paths` (files or directories) and wait until each is Established."""
        names = []
        for path in paths:
            files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
            for f in files:
                for doc in yaml.safe_load_all(f.read_text()):
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                        result = self.apply(doc)
                        if isinstance(result, Rejection):
                            raise RuntimeError(f"{f}: {result}")
                        names.append(doc["metadata"]["name"])
        ext = k8s.ApiextensionsV1Api(self.api)
        deadline = time.monotonic() + 60
        for name in names:
            while True:
                crd = ext.read_custom_resource_definition(name)
                if any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions if crd.status else None) or []):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {name} was not Established after 60 s")
                time.sleep(0.2)
        self.dyn.resources.invalidate_cache()
        return names


def _message(exc: ApiException) -> str:
    try:
        import json

        body = json.loads(exc.body or "")
        return str(body.get("message", exc.body))
    except (TypeError, ValueError):
        return str(exc.body or exc.reason)


def missing(written: Any, stored: Any, path: str = "") -> list[str]:
    """Where `stored` does not hold what `written` says: every written field must be stored with its
    value (the server may add defaults and metadata, never drop or change what was written)."""
    if isinstance(written, dict):
        if not isinstance(stored, dict):
            return [f"{path or '.'}: written a mapping, stored {stored!r}"]
        out = []
        for key, value in written.items():
            if key not in stored:
                out.append(f"{path}.{key}: written {value!r}, not stored")
            else:
                out.extend(missing(value, stored[key], f"{path}.{key}"))
        return out
    if isinstance(written, list):
        if not isinstance(stored, list) or len(stored) != len(written):
            return [f"{path}: written {written!r}, stored {stored!r}"]
        return [m for i, (w, s) in enumerate(zip(written, stored)) for m in missing(w, s, f"{path}[{i}]")]
    if written != stored:
        return [f"{path}: written {written!r}, stored {stored!r}"]
    return []
