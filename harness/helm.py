"""The real Helm (harness/build.d/helm.sh, HELM_VERSION in versions.env), run the way Argo CD's repo server runs it.

`render(chart, ...)` is `helm template` of a chart folder with values files, a release name and namespace,
`--kube-version` and one `--api-versions` per entry: it returns the parsed documents, or raises `HelmFailed`
holding Helm's error text (for a chart's own `fail`, the message and the template that failed).

The API versions are those Argo CD passes for a cluster (`api_versions(minor, control_plane)`). Argo CD's
application controller takes them from its cluster cache, which discovers the API server's *preferred*
resources (client-go `ServerPreferredResources`: per group and resource, the group's preferred version if it
serves the resource, else the first version listed that does), keeps the resources that can be listed and
watched, and passes each group/version and each group/version/Kind of them (gitops-engine pkg/utils/kube/ctl.go
GetAPIResources(preferred=true), argo-cd util/argo APIResourcesToStrings(includeKinds=true), v3.3.19). With a
harness API server the list is that server's discovery through the same rules; without one, the list this module
carries for the minor (`BUILTIN_API_VERSIONS`: recorded from the harness's API servers for each minor gpuc supports,
built-in APIs only; tests/real/test_real_charts.py checks it against a live server). Helm itself adds every
group/version its client-go knows (never a Kind) to what it is given, so charts that look for a Kind
(`resource.k8s.io/v1/DeviceClass`) see only what is passed.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import components

if TYPE_CHECKING:
    from .controlplane import ControlPlane

Doc = dict[str, Any]


class HelmFailed(RuntimeError):
    """`helm template` refused the chart: `error` is Helm's error text (stderr without the `Error: ` prefix);
    for a template's `fail` call, `template` is where it failed (chart/templates/file.yaml:line:col) and `message`
    the text the chart failed with; for any other error `template` is None and `message` is the whole error."""

    def __init__(self, argv: list[str], stderr: str) -> None:
        self.argv = argv
        self.stderr = stderr
        at = stderr.find("Error: ")  # warnings (coalesce.go, walk.go, ...) come before it
        self.error = (stderr[at + len("Error: "):] if at >= 0 else stderr).strip()
        m = re.match(r"execution error at \(([^)]*)\): (.*)", self.error, re.S)
        self.template: str | None = m.group(1) if m else None
        message = m.group(2) if m else self.error
        self.message: str = re.sub(r"\s*Use --debug flag to render out invalid YAML\s*$", "", message).strip()
        super().__init__(f"helm template failed: {self.error}")


def binary() -> Path:
    """The Helm build (ComponentMissing naming harness/build.sh when it is not built)."""
    return components.binary(f"helm-{components.pins()['HELM_VERSION']}")


def render(chart: Path, *, release: str, namespace: str, values: Sequence[Path | Mapping[str, Any]] = (),
           kube_version: str | None = None, api_versions: Iterable[str] | None = None, timeout: float = 120,
           include_crds: bool = False) -> list[Doc]:
    """`helm template RELEASE CHART --namespace NS [--kube-version V] [--api-versions X ...] [--values F ...]`:
    the rendered documents (CRDs in crds/ only with `include_crds`, of the chart and its enabled subcharts), in Helm's
    order.

    `values` are files or mappings (written to a temporary file), applied in order as Argo CD applies valueFiles;
    `kube_version` as Argo CD passes it ("v1.34.0"; "1.34" is taken as "v1.34.0"); `api_versions` usually
    `api_versions(minor)`. Raises HelmFailed when Helm refuses the chart."""
    argv = [str(binary()), "template", release, str(chart), "--namespace", namespace]
    if kube_version:
        v = kube_version if kube_version.startswith("v") else "v" + kube_version
        argv += ["--kube-version", v if v.count(".") >= 2 else v + ".0"]
    for version in api_versions or ():
        argv += ["--api-versions", version]
    if include_crds:
        argv.append("--include-crds")
    with tempfile.TemporaryDirectory(prefix="gpuc-helm-") as tmp:
        for i, value in enumerate(values):
            if isinstance(value, Path):
                path = value
            else:
                path = Path(tmp) / f"values-{i}.yaml"
                path.write_text(yaml.safe_dump(dict(value), sort_keys=False))
            argv += ["--values", str(path)]
        env = {"HELM_CACHE_HOME": f"{tmp}/cache", "HELM_CONFIG_HOME": f"{tmp}/config", "HELM_DATA_HOME": f"{tmp}/data",
               "PATH": "/usr/bin:/bin", "HOME": tmp}
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if result.returncode != 0:
        raise HelmFailed(argv, result.stderr)
    return [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict)]


# -- the API versions Argo CD passes ---------------------------------------------------------------------------------

def argocd_api_versions(groups: Sequence[Doc], resources: Mapping[str, Sequence[Doc]]) -> list[str]:
    """What Argo CD passes as --api-versions for a server with this discovery: `groups` the APIGroups (the core
    group first, as client-go lists it: name "", versions [v1]), `resources` the APIResource lists by groupVersion.
    client-go ServerPreferredResources, then the list+watch filter, then group/version and group/version/Kind."""
    chosen: dict[tuple[str, str], tuple[str, Doc]] = {}  # (group, resource) -> (groupVersion, APIResource)
    for group in groups:
        preferred = (group.get("preferredVersion") or {}).get("version")
        for version in group["versions"]:
            for res in resources.get(version["groupVersion"], ()):
                if "/" in res["name"]:
                    continue  # subresources
                key = (group["name"], res["name"])
                if key in chosen and version["version"] != preferred:
                    continue  # only the preferred version overrides
                chosen[key] = (version["groupVersion"], res)
    out: set[str] = set()
    for gv, res in chosen.values():
        verbs = {v.lower() for v in res.get("verbs") or ()}
        if {"list", "watch"} <= verbs:
            out |= {gv, f"{gv}/{res['kind']}"}
    return sorted(out)


def discovered_api_versions(cp: ControlPlane) -> list[str]:
    """Argo CD's --api-versions for a running harness API server (its built-in APIs and any CRDs it serves)."""
    def get(path: str) -> Doc:
        status, body = cp.get(path)
        if status != 200:
            raise RuntimeError(f"GET {path} on {cp.server}: HTTP {status}: {body[:200]!r}")
        doc: Doc = json.loads(body)
        return doc

    core = get("/api")
    groups: list[Doc] = [{"name": "", "versions": [{"groupVersion": v, "version": v} for v in core["versions"]],
                          "preferredVersion": {"groupVersion": core["versions"][0], "version": core["versions"][0]}}]
    groups += get("/apis")["groups"]
    resources = {}
    for group in groups:
        for version in group["versions"]:
            gv = version["groupVersion"]
            resources[gv] = get(f"/api/{gv}" if group["name"] == "" else f"/apis/{gv}")["resources"]
    return argocd_api_versions(groups, resources)


def api_versions(minor: str, control_plane: ControlPlane | None = None) -> list[str]:
    """The --api-versions Argo CD passes for a cluster of Kubernetes `minor`: from `control_plane`'s discovery when
    one is given (it must behave as that minor), else from BUILTIN_API_VERSIONS."""
    if control_plane is not None:
        if control_plane.minor != minor:
            raise ValueError(f"the control plane behaves as Kubernetes {control_plane.minor}, not {minor}")
        return discovered_api_versions(control_plane)
    if minor not in BUILTIN_API_VERSIONS:
        raise KeyError(f"no API version list for Kubernetes {minor}: lists exist for {', '.join(BUILTIN_API_VERSIONS)}")
    return sorted({x for gv, kinds in BUILTIN_API_VERSIONS[minor].items() for x in (gv, *(f"{gv}/{k}" for k in kinds))})


# Per minor: groupVersion -> the Kinds Argo CD passes with it, space-separated (built-in APIs only; a real cluster adds
# its CRDs' and aggregated APIs'). Recorded on 2026-11-26 with discovered_api_versions() from the harness's API servers
# (kube-apiserver 1.34.4 as 1.32-1.34, 1.37.2 as 1.35-1.37 through --emulated-version, with the runtime config
# harness/controlplane.py gives 1.32 and 1.33 so that they serve resource.k8s.io, as a DRA cluster of theirs does).
# Preferred versions only: 1.33 passes resource.k8s.io/v1beta2 and not v1beta1, and autoscaling/v2 but not v1.
_EVERY_MINOR: dict[str, str] = {
    "v1": (
        "ConfigMap Endpoints Event LimitRange Namespace Node PersistentVolume PersistentVolumeClaim Pod PodTemplate ReplicationController "
        "ResourceQuota Secret Service ServiceAccount"
    ),
    "admissionregistration.k8s.io/v1": (
        "MutatingWebhookConfiguration ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding "
        "ValidatingWebhookConfiguration"
    ),
    "apiextensions.k8s.io/v1": "CustomResourceDefinition",
    "apiregistration.k8s.io/v1": "APIService",
    "apps/v1": "ControllerRevision DaemonSet Deployment ReplicaSet StatefulSet",
    "autoscaling/v2": "HorizontalPodAutoscaler",
    "batch/v1": "CronJob Job",
    "certificates.k8s.io/v1": "CertificateSigningRequest",
    "coordination.k8s.io/v1": "Lease",
    "discovery.k8s.io/v1": "EndpointSlice",
    "events.k8s.io/v1": "Event",
    "flowcontrol.apiserver.k8s.io/v1": "FlowSchema PriorityLevelConfiguration",
    "networking.k8s.io/v1": "Ingress IngressClass NetworkPolicy",
    "node.k8s.io/v1": "RuntimeClass",
    "policy/v1": "PodDisruptionBudget",
    "rbac.authorization.k8s.io/v1": "ClusterRole ClusterRoleBinding Role RoleBinding",
    "scheduling.k8s.io/v1": "PriorityClass",
    "storage.k8s.io/v1": "CSIDriver CSINode CSIStorageCapacity StorageClass VolumeAttachment",
}
_OF_MINOR: dict[str, dict[str, str]] = {
    "1.32": {
        "resource.k8s.io/v1beta1": "DeviceClass ResourceClaim ResourceClaimTemplate ResourceSlice",
    },
    "1.33": {
        "networking.k8s.io/v1": "IPAddress ServiceCIDR",
        "resource.k8s.io/v1beta2": "DeviceClass ResourceClaim ResourceClaimTemplate ResourceSlice",
    },
    "1.34": {
        "networking.k8s.io/v1": "IPAddress ServiceCIDR",
        "resource.k8s.io/v1": "DeviceClass ResourceClaim ResourceClaimTemplate ResourceSlice",
        "storage.k8s.io/v1": "VolumeAttributesClass",
    },
    "1.35": {
        "networking.k8s.io/v1": "IPAddress ServiceCIDR",
        "resource.k8s.io/v1": "DeviceClass ResourceClaim ResourceClaimTemplate ResourceSlice",
        "storage.k8s.io/v1": "VolumeAttributesClass",
    },
    "1.36": {
        "admissionregistration.k8s.io/v1": "MutatingAdmissionPolicy MutatingAdmissionPolicyBinding",
        "networking.k8s.io/v1": "IPAddress ServiceCIDR",
        "resource.k8s.io/v1": "DeviceClass ResourceClaim ResourceClaimTemplate ResourceSlice",
        "storage.k8s.io/v1": "VolumeAttributesClass",
    },
    "1.37": {
        "admissionregistration.k8s.io/v1": "MutatingAdmissionPolicy MutatingAdmissionPolicyBinding",
        "certificates.k8s.io/v1": "ClusterTrustBundle PodCertificateRequest",
        "networking.k8s.io/v1": "IPAddress ServiceCIDR",
        "resource.k8s.io/v1": "DeviceClass DeviceTaintRule ResourceClaim ResourceClaimTemplate ResourceSlice",
        "storage.k8s.io/v1": "VolumeAttributesClass",
        "storagemigration.k8s.io/v1": "StorageVersionMigration",
    },
}
BUILTIN_API_VERSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    minor: {gv: tuple(sorted(set(_EVERY_MINOR.get(gv, "").split()) | set(extra.get(gv, "").split())))
            for gv in sorted(set(_EVERY_MINOR) | set(extra))}
    for minor, extra in _OF_MINOR.items()
}
