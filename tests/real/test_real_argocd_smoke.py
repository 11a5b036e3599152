"""The real Argo CD (harness/argocd.py) syncs a local git repository into a real API server.

The smoke test of the harness itself: plain YAML and a kustomization are synced by the built Argo CD
(automated sync), a new commit is picked up and synced again (a changed object updated, a removed one
pruned), and the sync's resource list shows the sync waves' order. The GitOps tests of gpuc's rendered
trees build on the same helpers.
"""

from __future__ import annotations

from pathlib import Path

from harness import argocd
from harness.argocd import GitRepo
from harness.servers import ControlPlanes

NS = "argocd-smoke"
KNS = "argocd-smoke-kustomize"


def _configmap(name: str, data: dict[str, str], wave: int | None = None, namespace: str = NS) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if wave is not None:
        meta["annotations"] = {"argocd.argoproj.io/sync-wave": str(wave)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _plain(version: str, *, with_late: bool = True) -> dict:
    """A Namespace in wave -1, `z-first` in the default wave 0 and `a-last` in wave 2: without the waves Argo
    CD would apply the two ConfigMaps by name (a-last first)."""
    files: dict = {
        "plain/namespace.yaml": {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": NS, "annotations": {"argocd.argoproj.io/sync-wave": "-1"}}},
        "plain/z-first.yaml": _configmap("z-first", {"version": version}),
    }
    if with_late:
        files["plain/a-last.yaml"] = _configmap("a-last", {"version": version}, wave=2)
    return files


KUSTOMIZATION = f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {KNS}
resources:
  - namespace.yaml
  - settings.yaml
# a kustomize-only feature: the generated ConfigMap's name carries a hash of its data
configMapGenerator:
  - name: generated
    literals:
      - greeting=hello
"""


def test_argocd_syncs_plain_yaml_and_kustomize_from_git(control_planes: ControlPlanes, tmp_path: Path) -> None:
    # the plane with the controllers: Argo CD prunes with foreground deletion, which only the garbage
    # collector completes (without it a pruned object keeps its foregroundDeletion finalizer for ever)
    cp = control_planes.get("1.34", scheduler=True)
    repo = GitRepo.init(tmp_path / "repo")
    repo.write(_plain("1"))
    repo.write({
        "kustomize/kustomization.yaml": KUSTOMIZATION,
        "kustomize/namespace.yaml": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KNS}},
        "kustomize/settings.yaml": _configmap("settings", {"mode": "kustomized"}, namespace="placeholder"),
    })
    first = repo.commit("first")

    with argocd.start(cp, tmp_path / "argocd", destination="harness", resync_s=5) as argo:
        argo.apply(argocd.application("smoke-plain", repo_url=repo.url, path="plain", destination="harness"))
        argo.apply(argocd.application("smoke-kustomize", repo_url=repo.url, path="kustomize", destination="harness"))
        argo.wait("smoke-plain", revision=first, timeout=180)
        argo.wait("smoke-kustomize", revision=first, timeout=180)

        kube = argo.kube
        assert kube.get("v1", "Namespace", NS) is not None
        for name in ("z-first", "a-last"):
            cm = kube.get("v1", "ConfigMap", name, NS)
            assert cm is not None and cm["data"] == {"version": "1"}, cm
        assert (kube.get("v1", "ConfigMap", "settings", KNS) or {}).get("data") == {"mode": "kustomized"}
        generated = [c["metadata"]["name"] for c in kube.items("v1", "ConfigMap", KNS) if c["metadata"]["name"].startswith("generated-")]
        assert len(generated) == 1, f"kustomize's configMapGenerator did not run: {generated}"

        # the waves, in the order Argo CD synced: -1, 0, 2 (by name alone a-last would come before z-first)
        result = argo.sync_result("smoke-plain")
        order = [r.key for r in result]
        assert order.index(f"Namespace/{NS}") < order.index(f"ConfigMap/{NS}/z-first") < order.index(f"ConfigMap/{NS}/a-last"), order
        assert all(r.status == "Synced" and r.sync_phase == "Sync" for r in result), result

        # a new commit: z-first changes, a-last is removed; the controller's resync sees the branch moved
        repo.write(_plain("2", with_late=False))
        repo.remove("plain/a-last.yaml")
        second = repo.commit("second")
        argo.wait("smoke-plain", revision=second, timeout=120)
        assert (kube.get("v1", "ConfigMap", "z-first", NS) or {}).get("data") == {"version": "2"}
        assert kube.get("v1", "ConfigMap", "a-last", NS) is None, "automated sync with prune left the removed ConfigMap"
        assert {r.key: r.status for r in argo.sync_result("smoke-plain")}.get(f"ConfigMap/{NS}/a-last") == "Pruned"

        # gpuc's partial argocd-cm merges in beside the install's keys (server-side apply, its own manager)
        health = Path(__file__).parents[1] / "golden" / "west" / "argocd" / "argocd-cm-health.yaml"
        merged = argo.merge_config(health)
        assert any(k.startswith("resource.customizations.health.") for k in merged), merged.keys()
        assert argo.config()["timeout.reconciliation"] == "5s" and set(merged) <= set(argo.config())

        # a refresh is what a test uses to hurry the controller: it takes the annotation and drops it
        third = repo.commit("third (no change)")
        argo.refresh("smoke-kustomize")
        argo.wait("smoke-kustomize", revision=third, phase=None, timeout=60)
        argo.wait_for("smoke-kustomize", lambda app: argocd.REFRESH not in (app["metadata"].get("annotations") or {}), "the refresh taken", 30)
