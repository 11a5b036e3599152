"""The rendered tree Argo CD consumes (DESIGN.md section 4.8): the files of one cluster.

DIR/<cluster>/ holds one YAML file per object, a kustomization.yaml listing them, the Helm values
files the chart Applications read, node labels per pool, and argocd/ with the Applications.
emit.staging writes them.
"""

from __future__ import annotations

from ..lower.argocd import values_file
from ..lower.graph import CompiledCluster, KubeObject
from .staging import MARKER
from .yaml_out import dump, dump_manifest

ARGOCD_CM_HEADER = (
    f"{MARKER}\n"
    "# Argo CD health checks for ResourceClaims, ComputeDomains, NIMCaches and NIMServices: keys of argocd-cm.\n"
    "# Not part of kustomization.yaml (Argo CD's install owns argocd-cm). Merge the keys in with\n"
    "#   kubectl apply --server-side --field-manager=gpuc -f argocd-cm-health.yaml\n"
    "# or list this file under `patches:` of the kustomization that installs Argo CD.\n")


def object_filename(obj: KubeObject) -> str:
    """The object's file, relative to its cluster's folder."""
    return obj.path


def _kustomization(files: list[str]) -> str:
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}
    return MARKER + "\n" + dump(body)


def cluster_files(compiled: CompiledCluster) -> dict[str, str]:
    """Relative path -> file content for one cluster."""
    files: dict[str, str] = {}
    folders: dict[str, list[str]] = {}  # "" (the cluster's folder) or releases/<name> -> its files, in sync order
    for obj in compiled.sorted_objects():
        files[obj.path] = dump_manifest(obj.manifest)
        folders.setdefault(obj.path.removesuffix(obj.file_name).rstrip("/"), []).append(obj.file_name)
    for folder, names in folders.items():
        files[f"{folder}/kustomization.yaml".lstrip("/")] = _kustomization(names)
    files.setdefault("kustomization.yaml", _kustomization([]))
    for release in compiled.releases:
        chart = release.chart
        header = (f"{MARKER}\n# Helm values for release {release.name} in namespace {release.namespace}:\n"
                  f"# chart {chart.name} {chart.version} from {chart.location}\n")
        files[values_file(release)] = header + dump(release.values)
    for name, values in sorted(compiled.advice.items()):
        files[name] = (f"{MARKER}\n# Not deployed by gpuc (gpuOperator.mode none): set these values on the release you run, e.g.\n"
                       "#   helm upgrade nvidia-device-plugin nvdp/nvidia-device-plugin --reuse-values -f nvidia-device-plugin.yaml\n"
                       "# so the device plugin stays off the nodes whose GPUs the DRA driver hands out (label nvidia.com/gpu.dra).\n"
                       + dump(values))
    labels = {pool: labels for pool, labels in compiled.node_labels.items()}
    files["node-labels.yaml"] = (
        f"{MARKER}\n# Labels each node pool's nodes must carry. Pools that list nodeNames get them as Node patches\n"
        "# in this directory; otherwise set them in the node provisioner (node group, Karpenter NodePool, ...).\n"
        + dump(labels))
    if compiled.gitops:
        app_names = []
        for app in sorted(compiled.gitops, key=KubeObject.sort_key):
            if app.patch:  # Argo CD's own settings: applied to the Argo CD install, not synced by an Application
                files[f"argocd/{app.name}-health.yaml"] = ARGOCD_CM_HEADER + dump_manifest(app.manifest)
                continue
            name = f"argocd/{app.name}.yaml"
            files[name] = dump_manifest(app.manifest)
            app_names.append(name.removeprefix("argocd/"))
        files["argocd/kustomization.yaml"] = _kustomization(app_names)
    return files
