"""What a render may do to its output directory: one render at a time, never a file gpuc did not write, and
nothing left behind when it fails."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from conftest import REPO, cluster_doc, gpuc, workload_doc


def tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def two_clusters(fleet):
    return fleet(clusters=[cluster_doc("c1"), cluster_doc("c2")], workloads={"w.yaml": [workload_doc(gpu={"count": 1})]})


def test_a_second_render_into_a_locked_directory_fails_cleanly_and_leaves_the_live_staging(fleet, tmp_path):
    from compiler.emit.staging import lock_tree

    path, out = two_clusters(fleet), tmp_path / "out"
    assert gpuc("render", path, "-o", out).code == 0
    before = tree(out)
    live = out / ".gpuc-tmp-live"  # the staging directory of the render that holds the lock
    (live / "new" / "c1").mkdir(parents=True)
    (live / "new" / "c1" / "kustomization.yaml").write_text("being written")
    fd = lock_tree(out)
    try:
        second = gpuc("render", path, "-o", out)
        assert second.code == 2 and "another gpuc render is writing this directory now" in second.err
        assert (live / "new" / "c1" / "kustomization.yaml").read_text() == "being written"
        assert tree(out) == before | {".gpuc-tmp-live/new/c1/kustomization.yaml": b"being written"}
    finally:
        os.close(fd)
    assert gpuc("render", path, "-o", out).code == 0  # the lock is gone with its holder: the leftover is cleaned
    assert tree(out) == before


def test_concurrent_renders_never_empty_or_corrupt_the_tree(fleet, tmp_path):
    path, out = two_clusters(fleet), tmp_path / "out"
    assert gpuc("render", path, "-o", tmp_path / "cold", "--no-cache").code == 0
    env = dict(os.environ, PYTHONPATH=str(REPO))
    runs = [subprocess.Popen([sys.executable, "-m", "compiler", "render", str(path), "-o", str(out)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in runs]  # type: ignore[union-attr]
    for p in runs:
        p.stdout.close()  # type: ignore[union-attr]
        p.stderr.close()  # type: ignore[union-attr]
    assert all(code == 0 or (code == 2 and "another gpuc render" in err) for code, err in results), results
    assert any(code == 0 for code, _ in results)
    assert tree(out) == tree(tmp_path / "cold")


def test_a_file_added_to_a_cluster_directory_stops_the_render(fleet, tmp_path):
    path, out = two_clusters(fleet), tmp_path / "out"
    assert gpuc("render", path, "-o", out).code == 0
    for rel in ("c1/RUNBOOK.md", "c1/values/notes.yaml", "c1/argocd/extra-app.yaml"):
        (out / rel).write_text("# mine\n")
        before = tree(out)
        result = gpuc("render", path, "-o", out)
        assert result.code == 2 and f"{out / rel}: error: -o: gpuc did not write this file" in result.err
        assert tree(out) == before
        (out / rel).unlink()
    os.symlink(tmp_path, out / "c1" / "link")
    assert str(out / "c1" / "link") in gpuc("render", path, "-o", out).err
    (out / "c1" / "link").unlink()
    edited = next((out / "c1").glob("*resourceclaimtemplate*"))
    edited.write_text("edited by hand\n")  # a file gpuc wrote, edited: it is gpuc's to write again
    assert gpuc("render", path, "-o", out).code == 0 and edited.read_text() != "edited by hand\n"


def test_a_changed_gke_fleet_renders_over_its_tree_and_files_added_to_a_release_folder_still_stop_it(fleet, tmp_path):
    """A provider: gke cluster's critical-pods quotas sit in releases/<release>/, listed only by that folder's
    kustomization.yaml: they are gpuc's to replace, a file added beside them is not."""
    pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8},
              "labels": {"gke-no-default-nvidia-gpu-device-plugin": "true"}}]
    path, out = fleet(clusters=[cluster_doc(provider="gke", pools=pools)], workloads={"w.yaml": [workload_doc(gpu={"count": 1})]}), tmp_path / "out"
    assert gpuc("render", path, "-o", out).code == 0
    quota = out / "c1" / "releases" / "nvidia-dra-driver-gpu" / "0-resourcequota-nvidia-dra-driver-gpu-gpuc-critical-pods.yaml"
    assert quota.is_file()
    (path / "workloads" / "w.yaml").write_text(yaml.safe_dump(workload_doc(gpu={"count": 2})))
    for extra in ((), ("--no-cache",)):
        result = gpuc("render", path, "-o", out, *extra)
        assert result.code == 0 and result.err == "", result.err
        assert gpuc("render", path, "-o", tmp_path / f"fresh{len(extra)}", "--no-cache").code == 0
        assert tree(out) == tree(tmp_path / f"fresh{len(extra)}")
    (quota.parent / "NOTES.md").write_text("# mine\n")
    before = tree(out)
    result = gpuc("render", path, "-o", out, "--no-cache")
    assert result.code == 2 and f"{quota.parent / 'NOTES.md'}: error: -o: gpuc did not write this file" in result.err
    assert str(quota) not in result.err and tree(out) == before
    (quota.parent / "NOTES.md").unlink()
    mine = out / "c1" / "releases" / "mine"  # a kustomization gpuc did not write vouches for nothing, not even itself
    mine.mkdir()
    (mine / "kustomization.yaml").write_text("resources:\n- app.yaml\n")
    (mine / "app.yaml").write_text("kind: ConfigMap\n")
    result = gpuc("render", path, "-o", out, "--no-cache")
    assert result.code == 2 and all(f"{mine / name}: error: -o: gpuc did not write this file" in result.err for name in ("app.yaml", "kustomization.yaml"))


def test_a_cluster_leaving_the_fleet_keeps_a_directory_holding_files_gpuc_did_not_write(fleet, tmp_path):
    path, out = two_clusters(fleet), tmp_path / "out"
    assert gpuc("render", path, "-o", out).code == 0
    (out / "c2" / "RUNBOOK.md").write_text("how to drain c2\n")
    (path / "clusters" / "c2.yaml").unlink()
    result = gpuc("render", path, "-o", out)
    assert result.code == 2 and f"{out / 'c2' / 'RUNBOOK.md'}: error" in result.err
    assert (out / "c2" / "RUNBOOK.md").read_text() == "how to drain c2\n"
    (out / "c2" / "RUNBOOK.md").unlink()
    assert gpuc("render", path, "-o", out).code == 0 and not (out / "c2").exists()


def test_a_failed_first_render_leaves_no_new_parent_directories(fleet, tmp_path):
    path = fleet(clusters=[cluster_doc("c1")], workloads={"w.yaml": [workload_doc(gpu={"count": 8}, replicas=3)]})
    result = gpuc("render", path, "-o", tmp_path / "a" / "b" / "out")  # three 8-GPU pods on two 8-GPU nodes
    assert result.code == 1 and not (tmp_path / "a").exists()


def test_validate_passes_only_names_render_can_write(fleet, tmp_path):
    name = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253 characters: a legal DNS subdomain
    cls = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": name},
           "spec": {"require": {"architecture": ["Hopper"]}}}
    path = fleet(clusters=[cluster_doc("c1")], workloads={"w.yaml": [workload_doc(gpu={"count": 1, "class": name})], "c.yaml": [cls]})
    validated = gpuc("validate", path)
    rendered = gpuc("render", path, "-o", tmp_path / "out")
    for result in (validated, rendered):
        assert result.code == 1 and f"c.yaml:5: error: spec: DeviceClass {name} metadata.name: the rendered file" in result.err
        assert "would be 272 bytes long; file systems take at most 255 bytes per name" in result.err
        assert "permission" not in result.err
    assert not (tmp_path / "out").exists()
