"""The running cluster read live, with the Kubernetes Python client and the user's kubeconfig.

The same kinds an export holds (facts: kubernetes.yaml `clusterState`), each in the version the API
server prefers, listed in pages as kubectl does. List responses leave `apiVersion` and `kind` off their
items; they are put back, so a live read and `kubectl get -o yaml` give gpuc the same objects. A kind
whose API group the server does not serve is simply absent (no NIM Operator installed); a kind the
credentials may not list is a warning, not a failure.
"""

from __future__ import annotations

import json
from typing import Any

from ..diagnostics import Diagnostic, InputError
from ..facts.platform import StateKind, state_kinds
from .state import ClusterState, StateObject

MANAGED = "app.kubernetes.io/managed-by=gpuc"
PAGE = 500
TIMEOUT = 30  # seconds per request
HINT = "check the context with `kubectl --kubeconfig FILE --context NAME get nodes`"


def _fail(where: str, message: str, hint: str = HINT) -> InputError:
    return InputError([Diagnostic(where, 0, "--kubeconfig", message, hint)])


def _client(kubeconfig: str | None, context: str | None) -> Any:
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    where = kubeconfig or "~/.kube/config"
    try:
        return config.new_client_from_config(config_file=kubeconfig, context=context, persist_config=False)
    except ConfigException as exc:
        text = str(exc)
        hint = "list the contexts with `kubectl config get-contexts`" if "context" in text.lower() else HINT
        raise _fail(where, f"cannot use the kubeconfig: {text}", hint) from None
    except OSError as exc:
        raise _fail(where, f"cannot read the kubeconfig: {exc.strerror or exc}", "pass --kubeconfig FILE") from None


def _served(api: Any) -> dict[str, tuple[str, ...]]:
    """API group -> served versions, the server's preferred one first ("" is the core API, v1)."""
    from kubernetes import client

    out: dict[str, tuple[str, ...]] = {"": ("v1",)}
    apis: Any = client.ApisApi(api)  # the generated client's annotations do not know _preload_content=False
    listing = json.loads(apis.get_api_versions(_preload_content=False, _request_timeout=TIMEOUT).data)
    for group in listing.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("version")
        versions = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
        out[group["name"]] = tuple(([preferred] if preferred else []) + [v for v in versions if v != preferred])
    return out


def _list(api: Any, kind: StateKind, version: str) -> list[dict[str, Any]]:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(api)
    core: Any = client.CoreV1Api(api)
    selector = MANAGED if kind.managed_only else None
    items: list[dict[str, Any]] = []
    token = None
    while True:
        paging: dict[str, Any] = {"limit": PAGE, "_request_timeout": TIMEOUT}
        if token:
            paging["_continue"] = token
        if selector:
            paging["label_selector"] = selector
        page: Any
        if kind.group:
            page = custom.list_cluster_custom_object(kind.group, version, kind.plural, **paging)
        else:
            lister = {"nodes": core.list_node, "namespaces": core.list_namespace,
                      "configmaps": core.list_config_map_for_all_namespaces}[kind.plural]
            page = json.loads(lister(_preload_content=False, **paging).data)
        for item in page.get("items") or []:
            item.setdefault("apiVersion", f"{kind.group}/{version}" if kind.group else version)
            item.setdefault("kind", kind.kind)
            items.append(item)
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def _first_served(api: Any, kind: StateKind, versions: tuple[str, ...]) -> list[dict[str, Any]]:
    """The kind's objects in the first of the group's versions that serves it (one group may serve kinds in
    different versions: ClusterPolicy in nvidia.com/v1, GPUCluster in nvidia.com/v1alpha1). None served: none exist."""
    from kubernetes.client.exceptions import ApiException

    for version in versions:
        try:
            return _list(api, kind, version)
        except ApiException as exc:
            if exc.status != 404:
                raise
    return []


def read_live(kubeconfig: str | None, context: str | None) -> ClusterState:
    """Every kind gpuc reads, listed from the cluster the kubeconfig context points at."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    api = _client(kubeconfig, context)
    host = api.configuration.host
    where = f"{context or 'current context'} ({host})"
    warnings: list[Diagnostic] = []
    objects: list[StateObject] = []
    complete: set[tuple[str, str]] = set()
    try:
        served = _served(api)
        for kind in state_kinds():
            versions = served.get(kind.group)
            if not versions:
                complete.add((kind.group, kind.kind))  # not served: there are none
                continue
            try:
                items = _first_served(api, kind, versions)
            except ApiException as exc:
                if exc.status in (401, 403):
                    warnings.append(Diagnostic(where, 0, "--kubeconfig", f"cannot list {kind.plural}: {exc.status} {exc.reason}",
                                               "grant list on it to these credentials; gpuc reads it for placement and status",
                                               "warning"))
                    continue
                raise
            complete.add((kind.group, kind.kind))
            objects.extend(StateObject(item, None, (0, ())) for item in items)
    except ApiException as exc:
        raise _fail(where, f"the API server answered {exc.status} {exc.reason}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise _fail(where, f"cannot reach the API server: {exc}") from None
    finally:
        api.close()
    return ClusterState(objects, (f"live: {where}",), frozenset(complete), served, live=True, warnings=tuple(warnings))
