"""Argo CD Applications for a cluster (DESIGN.md section 4.8).

One multi-source Application per Helm chart (the chart from its repository, the values file from the
GitOps repository) and one Application for the rendered directory. They live in the rendered
tree's `argocd/` folder, which an app-of-apps or ApplicationSet points at.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ..facts import load_table
from ..validate.intents import GitOps
from .graph import RELEASES_DIR, CompiledCluster, HelmRelease, KubeObject, Wave
from .meta import make_object

ARGO_API = "argoproj.io/v1alpha1"
RENDERED_APP_WAVE = Wave.NODE_CONFIG  # after the chart Applications, which are wave 0
# Argo CD does not retry a failed automated sync of the same revision unless told to; a first sync
# can fail while a chart's CRDs or namespaces are still arriving.
RETRY = {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}}


APPLICATION_SOURCES = {
    "": ("spec.gitops",),
    "metadata.namespace": ("spec.gitops.namespace", "spec.gitops"),
    "spec.project": ("spec.gitops.project", "spec.gitops"),
    "spec.destination": ("spec.gitops.destination", "spec.gitops"),
    "spec.source.repoURL": ("spec.gitops.repoURL", "spec.gitops"),
    "spec.source.path": ("spec.gitops.path", "spec.gitops"),
    "spec.source.targetRevision": ("spec.gitops.targetRevision", "spec.gitops"),
    **{f"spec.sources[{i}].repoURL": ("spec.charts", "spec.gitops.repoURL", "spec.draDriver.version", "spec.gitops") for i in (0, 1)},
    "spec.sources[0].path": ("spec.charts", "spec.gitops"),
    **{f"spec.sources[{i}].targetRevision": ("spec.draDriver.version", "spec.gitops.targetRevision", "spec.gitops") for i in (0, 1)},
    "spec.sources[2]": ("spec.provider", "spec.gitops"),
}


# Argo CD compares what the API server would store (a server-side apply dry run), not the manifest as written. A
# field the server drops is otherwise OutOfSync forever: the DRA driver chart (25.12+) gives its gpu.nvidia.com
# DeviceClass extendedResourceName on resource.k8s.io/v1, which a 1.34 server (DRAExtendedResource off) drops;
# tests/real/test_real_gitops.py saw that chart Application never Synced.
SERVER_SIDE_DIFF = {"argocd.argoproj.io/compare-options": "ServerSideDiff=true"}

RESOURCES_FINALIZER = load_table("argocd")["deletion"]["finalizer"]

# Argo CD's ConfigMap, and the label without which Argo CD ignores it.
ARGOCD_CM = "argocd-cm"
ARGOCD_CM_LABELS = {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"}
HEALTH_KEY = "resource.customizations.health.{}"


@functools.cache
def health_checks() -> dict[str, str]:
    """argocd-cm key -> Lua health check, one per kind Argo CD has none for (argocd_health/<group>_<Kind>.lua)."""
    folder = resources.files(__package__).joinpath("argocd_health")
    scripts = sorted((f for f in folder.iterdir() if f.name.endswith(".lua")), key=lambda f: f.name)
    return {HEALTH_KEY.format(f.name.removesuffix(".lua")): f.read_text(encoding="utf-8") for f in scripts}


def health_patch(compiled: CompiledCluster) -> KubeObject:
    """The argocd-cm keys that teach Argo CD the health of claims, ComputeDomains and NIM resources.

    A partial ConfigMap for server-side apply (or a kustomize patch), not one of the Applications: Argo CD's
    own install owns argocd-cm. Every cluster gets all the checks, byte-identical, so applying several
    clusters' copies to one Argo CD with one field manager never drops another cluster's keys."""
    gitops = compiled.cluster.spec.gitops
    assert gitops is not None
    manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": ARGOCD_CM, "namespace": gitops.namespace, "labels": dict(ARGOCD_CM_LABELS)},
                "data": health_checks()}
    return KubeObject(manifest, Wave.CHARTS, "argocd/health", compiled.cluster.intent.source, patch=True,
                      sources={"": ("spec.gitops",), "metadata.namespace": ("spec.gitops.namespace", "spec.gitops")})


def values_file(release: HelmRelease) -> str:
    return f"values/{release.name}.yaml"


def _destination(compiled: CompiledCluster, namespace: str | None) -> dict[str, Any]:
    dest = compiled.cluster.spec.gitops.destination
    out: dict[str, Any] = {"name": dest.name} if dest.name else {"server": dest.server}
    if namespace:
        out["namespace"] = namespace
    return out


def _chart_source(release: HelmRelease, values_path: str, gitops: GitOps) -> dict[str, Any]:
    chart = release.chart
    helm = {"releaseName": release.name, "valueFiles": [f"$values/{values_path}"]}
    if chart.path:  # unpacked in the GitOps repository (spec.charts directory): a Git source with a path
        return {"repoURL": gitops.repo_url, "targetRevision": gitops.target_revision, "path": chart.path, "helm": helm}
    repo = chart.repository.removeprefix("oci://")  # Argo CD names OCI Helm repositories without the scheme
    return {"repoURL": repo, "chart": chart.name, "targetRevision": chart.version, "helm": helm}


def lower_argocd(compiled: CompiledCluster) -> list[KubeObject]:
    gitops = compiled.cluster.spec.gitops
    if gitops is None:
        return []
    ref = compiled.cluster.intent.source
    base = gitops.path.rstrip("/")
    apps = []
    with_objects = {o.release for o in compiled.objects if o.release}  # synced beside their chart (KubeObject.release)
    for release in compiled.releases:
        spec = {
            "project": gitops.project,
            "destination": _destination(compiled, release.namespace),
            "sources": [
                _chart_source(release, f"{base}/{values_file(release)}", gitops),
                {"repoURL": gitops.repo_url, "targetRevision": gitops.target_revision, "ref": "values"},
                *([{"repoURL": gitops.repo_url, "targetRevision": gitops.target_revision,
                    "path": f"{base}/{RELEASES_DIR}/{release.name}"}] if release.name in with_objects else []),
            ],
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["CreateNamespace=true", "ServerSideApply=true",
                                           *([f"PrunePropagationPolicy={release.prune_propagation}"]
                                             if release.prune_propagation else [])],
                           "retry": RETRY},
        }
        app = make_object(ARGO_API, "Application", f"{compiled.name}-{release.name}", namespace=gitops.namespace,
                          wave=release.wave, component=f"argocd/{release.component}", origin=release.origin,
                          annotations=dict(SERVER_SIDE_DIFF), body={"spec": spec}, sources=APPLICATION_SOURCES)
        # Removed from the tree (a release renamed, a chart dropped), the Application takes what it deployed with it;
        # without the finalizer Argo CD deletes the Application alone, and the chart's kubelet plugin DaemonSet runs on
        # beside its successor's (facts/data/argocd.yaml deletion)
        app.manifest["metadata"]["finalizers"] = [RESOURCES_FINALIZER]
        apps.append(app)
    rendered = {
        "project": gitops.project,
        "destination": _destination(compiled, None),
        "source": {"repoURL": gitops.repo_url, "targetRevision": gitops.target_revision, "path": base},
        "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                       # old claims (hashed names) are pruned only after their replacements are healthy
                       "syncOptions": ["PruneLast=true"], "retry": RETRY},
    }
    apps.append(make_object(ARGO_API, "Application", f"{compiled.name}-gpuc", namespace=gitops.namespace,
                            wave=RENDERED_APP_WAVE, component="argocd/rendered", origin=ref,
                            annotations=dict(SERVER_SIDE_DIFF),
                            body={"spec": rendered}, sources=APPLICATION_SOURCES))
    apps.append(health_patch(compiled))
    return apps
