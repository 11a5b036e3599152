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

import yaml

from ..diagnostics import Diagnostic, InputError
from ..facts.platform import StateKind, state_kinds
from .state import ClusterState, StateObject, malformed, mistyped

MANAGED = "app.kubernetes.io/managed-by=gpuc"
PAGE = 500
TIMEOUT = 30  # seconds per request
HINT = "check the context with `kubectl --kubeconfig FILE --context NAME get nodes`"


def _fail(where: str, message: str, hint: str = HINT) -> InputError:
    return InputError([Diagnostic(where, 0, "--kubeconfig", message, hint)])


def _client(kubeconfig: str | None, context: str | None) -> Any:
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    where = kubeconfig or "~/.kube/config"
    settings = client.Configuration()
    settings.retries = 0  # a server that does not answer is given up after TIMEOUT, not four times TIMEOUT
    try:
        return config.new_client_from_config(config_file=kubeconfig, context=context, persist_config=False,
                                             client_configuration=settings)
    except ConfigException as exc:
        text = str(exc)
        hint = "list the contexts with `kubectl config get-contexts`" if "context" in text.lower() else HINT
        raise _fail(where, f"cannot use the kubeconfig: {text}", hint) from None
    except OSError as exc:
        raise _fail(where, f"cannot read the kubeconfig: {exc.strerror or exc}", "pass --kubeconfig FILE") from None
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        # the client assumes a mapping of mappings: bad YAML, a binary file or a list fails inside it
        what = "is not valid YAML" if isinstance(exc, yaml.YAMLError) else "is not a kubeconfig (a YAML mapping of clusters, contexts and users)"
        raise _fail(where, f"cannot use the kubeconfig: the file {what}",
                    "pass the file `kubectl config view --raw` prints, with --kubeconfig FILE") from None


def _served(api: Any) -> dict[str, tuple[str, ...]]:
    """API group -> served versions, the server's preferred one first ("" is the core API, v1)."""
    from kubernetes import client

    out: dict[str, tuple[str, ...]] = {"": ("v1",)}
    apis: Any = client.ApisApi(api)  # the generated client's annotations do not know _preload_content=False
    listing = _object(apis.get_api_versions(_preload_content=False, _request_timeout=TIMEOUT), "/apis")
    groups = listing.get("groups") or []
    if not isinstance(groups, list):
        raise _Malformed("/apis", "`groups` is not a list")
    for group in groups:
        name = group.get("name") if isinstance(group, dict) else None
        if not isinstance(name, str) or not name:
            raise _Malformed("/apis", f"an API group without a name: {json.dumps(group)[:80]}")
        preferred = (group.get("preferredVersion") or {}).get("version")
        listed = [v.get("version") if isinstance(v, dict) else None for v in group.get("versions") or []]
        versions: list[str] = [v for v in listed if isinstance(v, str)]
        out[name] = tuple(([preferred] if isinstance(preferred, str) else []) + [v for v in versions if v != preferred])
    return out


class _Malformed(Exception):
    """The API server's answer is not what the Kubernetes API returns (a proxy's error page, a broken server)."""

    def __init__(self, request: str, problem: str) -> None:
        super().__init__(f"{request}: {problem}")


def _object(response: Any, request: str) -> dict[str, Any]:
    """A response body that must be a JSON object."""
    try:
        body = json.loads(response.data)
    except (ValueError, UnicodeDecodeError):
        raise _Malformed(request, f"the body is not JSON ({bytes(response.data[:40])!r})") from None
    if not isinstance(body, dict):
        raise _Malformed(request, f"the body is a JSON {type(body).__name__}, not an object")
    return body


def _list(api: Any, kind: StateKind, version: str) -> list[dict[str, Any]]:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(api)
    core: Any = client.CoreV1Api(api)
    selector = MANAGED if kind.managed_only else None
    items: list[dict[str, Any]] = []
    token = None
    seen: set[str] = set()
    request = f"{kind.group + '/' if kind.group else ''}{version}/{kind.plural}"
    while True:
        paging: dict[str, Any] = {"limit": PAGE, "_request_timeout": TIMEOUT, "_preload_content": False}
        if token:
            paging["_continue"] = token
        if selector:
            paging["label_selector"] = selector
        if kind.group:
            response = custom.list_cluster_custom_object(kind.group, version, kind.plural, **paging)
        else:
            lister = {"nodes": core.list_node, "namespaces": core.list_namespace,
                      "configmaps": core.list_config_map_for_all_namespaces}[kind.plural]
            response = lister(**paging)
        page = _object(response, request)
        listed = page.get("items") or []
        if not isinstance(listed, list) or not all(isinstance(i, dict) for i in listed):
            raise _Malformed(request, "`items` is not a list of objects")
        for item in listed:
            item.setdefault("apiVersion", f"{kind.group}/{version}" if kind.group else version)
            item.setdefault("kind", kind.kind)
            if problem := malformed(item):
                raise _Malformed(request, f"an item is not a Kubernetes object: {problem}")
            items.append(item)
        metadata = page.get("metadata")
        token = metadata.get("continue") if isinstance(metadata, dict) else None
        if not token:
            return items
        if not isinstance(token, str) or token in seen:  # a server that pages in a circle would be read forever
            raise _Malformed(request, f"the `continue` token {str(token)[:40]!r} repeats")
        seen.add(token)


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
    except _Malformed as exc:
        raise _fail(where, f"the API server's answer is not the Kubernetes API's: {exc}",
                    "check that the kubeconfig's server is the cluster's API server, not a proxy or a web page") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
        if isinstance(cause, urllib3.exceptions.TimeoutError) and not isinstance(cause, urllib3.exceptions.NewConnectionError):
            raise _fail(where, f"the API server did not answer within {TIMEOUT} s") from None  # (NewConnectionError: refused)
        raise _fail(where, f"cannot reach the API server: {exc}") from None
    finally:
        api.close()
    wrong = [d for obj in objects for d in mistyped(obj)]  # a server (or proxy) that is not the API server it claims
    if wrong:
        raise InputError(wrong)
    return ClusterState(objects, (f"live: {where}",), frozenset(complete), served, live=True, warnings=tuple(warnings))
