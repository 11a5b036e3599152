"""The GitOps path as users run it, on real components: a fleet rendered by gpuc into a git repository that holds
the real charts (spec.charts directory mode, laid out as the README tells users), the real Argo CD syncing the
rendered app-of-apps into a real API server, with the real scheduler and workload controllers.

One class owns the processes of a run (in the spirit of Argo CD's e2e fixtures): `GitOpsRun.start()` gives a
run whose `render()`, `sync()` and the assertions read Argo CD's own state. No kubelet runs: the kubelet
stand-in (harness/kubelet.py) reports bound pods as started (container start is played), so a chart's Deployment can
become available; no NVIDIA image runs, no GPU exists, and operators are played by writing the status fields they
write. The workers here are plain nodes, so no claim is prepared in this run: the DRA kubelet plugins prepare gpuc's
claims on mock GPU nodes in tests/real/test_real_kubelet_plugin.py (harness/node.py), where the stand-in still plays
container start and with it the readiness of the MPS control daemon's pod, and the ComputeDomain daemons' status.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import argocd, controlplane
from harness.argocd import ArgoCD, GitRepo
from harness.controlplane import ControlPlane
from harness.kube import Kube
from harness.kubelet import KubeletStandIn, add_node
from harness.servers import server_for

from conftest import EXAMPLES, REFERENCE, writable_copy

CHARTS = REFERENCE.parent / "upstream" / "charts"  # ../shared/upstream/charts: the real charts at their tags
Obj = dict[str, Any]

# GKE admits pods of the system-*-critical priority classes outside kube-system only under a ResourceQuota that
# names them (its API server's ResourceQuota admission has them as limitedResources); the same configuration here.
GKE_ADMISSION = {
    "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
    "plugins": [{"name": "ResourceQuota", "configuration": {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
        "limitedResources": [{"resource": "pods", "matchScopes": [{
            "scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical", "system-cluster-critical"]}]}]}}],
}


def chart_folder(name: str, version: str) -> tuple[Path, str]:
    """The real chart for `name` `version` in ../shared/upstream/charts, and what stands in for what: the DRA driver
    0.5.x has no tag, so its main branch (0.5.0-dev, 12 days before v0.5.0) is the chart of a 0.5 cluster."""
    exact = CHARTS / f"{name}-{version}"
    if exact.is_dir():
        return exact, ""
    line = ".".join(version.split(".")[:2])
    near = sorted(CHARTS.glob(f"{name}-{line}.*"))
    if not near:
        raise AssertionError(f"no chart {name} {version} (nor of its line) in {CHARTS}")
    return near[-1], f"{name} {version} is rendered from {near[-1].name}, the nearest chart there is"


def place_chart(src: Path, dest: Path) -> None:
    """Unpack a chart where spec.charts.directory says, as `helm pull --untar --untardir` + `mv` would. The NIM
    Operator 3.1.2 chart declares two dependency charts (dynamo, off by default: `dynamo.enabled: false`) that its
    folder lacks; the packaged chart `helm pull` unpacks carries them in charts/. Here they are dropped from
    Chart.yaml instead, which renders the same objects (Helm leaves out disabled subcharts); without either, Argo
    CD's repo server would run `helm dependency build` against the internet."""
    writable_copy(src, dest)  # shared/ is read-only: the copy is ours
    meta = dest / "Chart.yaml"
    chart = yaml.safe_load(meta.read_text())
    missing = [d for d in chart.get("dependencies") or [] if not (dest / "charts" / d["name"]).is_dir()]
    if missing:
        values = yaml.safe_load((dest / "values.yaml").read_text()) or {}
        for dep in missing:
            flag: Any = values
            for part in str(dep.get("condition", "")).split("."):
                flag = flag.get(part) if isinstance(flag, dict) else None
            assert flag is False, f"{src.name}: dependency {dep['name']} is missing and on by default ({dep.get('condition')})"
        chart["dependencies"] = [d for d in chart["dependencies"] if d not in missing]
        meta.write_text(yaml.safe_dump(chart, sort_keys=False))


def add_nodes(kube: Kube, workers: dict[str, dict[str, str]]) -> None:
    """A control-plane node (the DRA driver's controller and the GPU Operator's CRD hook require one), and the workers
    (name -> labels)."""
    add_node(kube, "control-plane-0", {"node-role.kubernetes.io/control-plane": ""},
             [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    for name, labels in workers.items():
        add_node(kube, name, labels)


def gpuc(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compiler", *map(str, args)], capture_output=True, text=True, timeout=600)


@dataclass
class GitOpsRun:
    """One cluster of a fleet, synced by Argo CD into its own API server."""

    cluster: str
    workdir: Path
    fleet: Path
    repo: GitRepo
    cp: ControlPlane
    argo: ArgoCD
    kubelet: KubeletStandIn
    stand_ins: list[str] = field(default_factory=list)  # which chart renders for which version

    # -- Given ------------------------------------------------------------------------------------------

    @classmethod
    def start(cls, workdir: Path, cluster: str, fleet: Path = EXAMPLES, *, gke: bool = False,
              nodes: dict[str, dict[str, str]] | None = None) -> GitOpsRun:
        """A copy of `fleet` whose `cluster` reads its charts from the git repository Argo CD syncs, an API
        server of the cluster's minor (allow-privileged for the charts' DaemonSets; GKE's quota admission when
        `gke`), the scheduler and workload controllers, Ready worker nodes, the kubelet stand-in and Argo CD."""
        repo = GitRepo.init(workdir / "repo")
        own = workdir / "fleet"
        shutil.copytree(fleet, own)
        path = own / "clusters" / f"{cluster}.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["spec"]["gitops"]["repoURL"] = repo.url
        doc["spec"]["charts"] = {"mirror": {"directory": "charts"}}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        minor = str(doc["spec"]["kubernetesVersion"])
        release, emulated = server_for(minor, newest=True)  # the scheduler and controllers are built at the newest
        args = ["--allow-privileged=true"]
        if gke:
            config = workdir / "admission.yaml"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(yaml.safe_dump(GKE_ADMISSION))
            args.append(f"--admission-control-config-file={config}")
        cp = controlplane.start(release, workdir / "control-plane", emulated_minor=emulated, scheduler=True,
                                controllers=True, workload_controllers=True, apiserver_args=tuple(args))
        try:
            kube = Kube(cp)
            add_nodes(kube, nodes or {"worker-0": {}})
            kubelet = KubeletStandIn(kube)
            destination = doc["spec"]["gitops"]["destination"]["name"]
            argo = argocd.start(cp, workdir / "argocd", destination=destination, resync_s=5)
        except BaseException:
            cp.stop()
            raise
        return cls(cluster, workdir, own, repo, cp, argo, kubelet)

    def stop(self) -> None:
        self.argo.stop()
        self.kubelet.stop()
        self.cp.stop()

    def __enter__(self) -> GitOpsRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- When -------------------------------------------------------------------------------------------

    def render(self, message: str = "render") -> str:
        """gpuc renders the fleet into the repository (rendered/), the charts its releases pin are placed in
        charts/<chart>-<version>/, and it is committed; the commit's SHA."""
        out = gpuc("render", self.fleet, "-o", self.repo.path / "rendered", "--cluster", self.cluster)
        assert out.returncode == 0, out.stderr
        for values in sorted((self.tree / "values").glob("*.yaml")):
            header = [line for line in values.read_text().splitlines()[:3] if line.startswith("# chart ")]
            if not header:
                continue  # values for a release gpuc does not deploy (gpuOperator.mode none)
            _, _, name, version, _, location = header[0].split(" ", 5)  # "# chart <name> <version> from <location>"
            dest = self.repo.path / location
            if not dest.exists():
                src, note = chart_folder(name, version)
                place_chart(src, dest)
                if note:
                    self.stand_ins.append(note)
        return self.repo.commit(message)

    @property
    def tree(self) -> Path:
        return self.repo.path / "rendered" / self.cluster

    def sync_app_of_apps(self) -> str:
        """The root Application users point at rendered/<cluster>/argocd, and gpuc's health checks merged into
        argocd-cm as the header of argocd-cm-health.yaml says; the root's name."""
        self.argo.merge_config(self.tree / "argocd" / "argocd-cm-health.yaml")
        root = f"{self.cluster}-apps"
        self.argo.apply(argocd.application(root, repo_url=self.repo.url, path=f"rendered/{self.cluster}/argocd",
                                           destination=self.argo.destination, namespace=argocd.NAMESPACE))
        return root

    # -- Then -------------------------------------------------------------------------------------------

    @property
    def kube(self) -> Kube:
        return self.argo.kube

    def applications(self) -> dict[str, Obj]:
        return {a["metadata"]["name"]: a for a in self.kube.items(argocd.ARGO_API, "Application", argocd.NAMESPACE)}

    def resource_health(self, app: str, kind: str) -> list[tuple[str, str, str]]:
        """(name, health, message) of the app's resources of `kind`, as Argo CD computed them."""
        out = []
        for r in ((self.argo.application(app) or {}).get("status") or {}).get("resources") or []:
            if r.get("kind") == kind:
                health = r.get("health") or {}
                out.append((r.get("name", ""), health.get("status", ""), health.get("message", "")))
        return out

    def write_status(self, obj: Obj, status: Obj) -> None:
        """Write `status` as the object's operator would (status subresource)."""
        meta = obj["metadata"]
        self.kube.set_status({"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                              "metadata": {"name": meta["name"], "namespace": meta.get("namespace")}, "status": status})

    def rendered_objects(self, folder: str = "") -> list[Obj]:
        """The objects gpuc rendered for the cluster's own Application (or a release's folder)."""
        base = self.tree / folder if folder else self.tree
        names = yaml.safe_load((base / "kustomization.yaml").read_text())["resources"]
        return [yaml.safe_load((base / n).read_text()) for n in names]

    def play_nim_operator(self) -> None:
        """What the NIM Operator writes once a cache is downloaded and a service's pods are ready (its status
        fields), for each NIMCache and NIMService on the server that has no status yet."""
        nim = "apps.nvidia.com/v1alpha1"
        for kind in ("NIMCache", "NIMService"):
            try:
                items = self.kube.items(nim, kind)
            except Exception:  # the CRD not installed yet
                continue
            for obj in items:
                if obj.get("status"):
                    continue
                name = obj["metadata"]["name"]
                status = ({"state": "Ready", "pvc": f"{name}-pvc"} if kind == "NIMCache" else
                          {"state": "Ready", "availableReplicas": obj["spec"].get("replicas", 1),
                           "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                           "lastTransitionTime": "2026-11-26T00:00:00Z"}]})
                self.write_status(obj, status)

    def sync_everything(self, root: str, timeout: float) -> None:
        """Wait for the app-of-apps to be Synced and Healthy, playing the NIM Operator's part as caches appear."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.play_nim_operator()
            app = self.argo.application(root) or {}
            st = app.get("status") or {}
            if (st.get("sync") or {}).get("status") == "Synced" and (st.get("health") or {}).get("status") == "Healthy":
                children = self.applications()
                if all(((a.get("status") or {}).get("sync") or {}).get("status") == "Synced" and
                       ((a.get("status") or {}).get("health") or {}).get("status") == "Healthy"
                       for n, a in children.items() if n != root):
                    return
            time.sleep(2)
        self.argo.wait(root, timeout=1)  # raises with Argo CD's own account of where it stopped
