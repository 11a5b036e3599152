"""The rendered tree: golden files, determinism, atomic writes, stale files, kustomize."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

import compiler.emit.staging as staging

from conftest import EXAMPLES, GOLDEN, REPO, cluster_doc, gpuc, workload_doc

REGENERATE = "gpuc render intents -o tests/golden"


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def render(fleet_path: Path, out: Path, *extra: str) -> None:
    result = gpuc("render", fleet_path, "-o", out, *extra)
    assert result.code == 0, result.err


def test_example_fleet_matches_golden_files(tmp_path):
    render(EXAMPLES, tmp_path / "out")
    actual, golden = read_tree(tmp_path / "out"), read_tree(GOLDEN)
    assert sorted(actual) == sorted(golden), f"file set changed; if intended, regenerate with `{REGENERATE}`"
    changed = [name for name in golden if actual[name] != golden[name]]
    assert not changed, f"rendered files differ from the golden files: {changed}; if intended, regenerate with `{REGENERATE}`"


def test_render_is_byte_identical_across_runs_and_hash_seeds(tmp_path):
    outs = []
    for seed in ("0", "12345"):
        out = tmp_path / f"out-{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO))
        subprocess.run([sys.executable, "-m", "compiler", "render", str(EXAMPLES), "-o", str(out)],
                       check=True, env=env, capture_output=True)
        outs.append(read_tree(out))
    assert outs[0] == outs[1]


def test_render_does_not_depend_on_directory_listing_order(tmp_path, monkeypatch):
    render(EXAMPLES, tmp_path / "a")
    original = pathlib.Path.glob
    monkeypatch.setattr(pathlib.Path, "glob", lambda self, pattern: reversed(list(original(self, pattern))))
    render(EXAMPLES, tmp_path / "b")
    assert read_tree(tmp_path / "a") == read_tree(tmp_path / "b")


def test_kubectl_kustomize_builds_every_cluster(tmp_path):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is part of the machine image this project targets"
    render(EXAMPLES, tmp_path / "out")
    for cluster in ("prod-east", "staging", "lab"):
        for sub in ("", "argocd"):
            built = subprocess.run([kubectl, "kustomize", str(tmp_path / "out" / cluster / sub)], check=True,
                                   capture_output=True, text=True).stdout
            docs = [d for d in yaml.safe_load_all(built) if d]
            listed = yaml.safe_load((tmp_path / "out" / cluster / sub / "kustomization.yaml").read_text())["resources"]
            assert len(docs) == len(listed) > 0


def test_one_file_per_object_listed_in_the_kustomization(tmp_path):
    render(EXAMPLES, tmp_path / "out")
    root = tmp_path / "out" / "prod-east"
    listed = yaml.safe_load((root / "kustomization.yaml").read_text())["resources"]
    on_disk = sorted(p.name for p in root.glob("*.yaml") if p.name not in ("kustomization.yaml", "node-labels.yaml"))
    assert sorted(listed) == on_disk
    for name in listed:
        docs = list(yaml.safe_load_all((root / name).read_text()))
        assert len(docs) == 1 and docs[0]["kind"]
    waves = [int(yaml.safe_load((root / n).read_text())["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for n in listed]
    assert waves == sorted(waves), "kustomization lists objects in apply order"


def test_stale_files_and_removed_clusters_disappear(fleet, tmp_path):
    path = fleet(clusters=[cluster_doc("c1"), cluster_doc("c2")], workloads={"w.yaml": [workload_doc(gpu={"count": 1})]})
    out = tmp_path / "out"
    render(path, out)
    old_claim = next((out / "c1").glob("3-resourceclaimtemplate-*"))
    (out / "c1" / "stray.yaml").write_text("kind: Stray\n")
    (out / "not-gpuc").mkdir()
    (out / "not-gpuc" / "keep.txt").write_text("mine")
    (path / "workloads" / "w.yaml").write_text(yaml.safe_dump(workload_doc(gpu={"count": 2})))
    (path / "clusters" / "c2.yaml").unlink()
    refused = gpuc("render", path, "-o", out)
    assert refused.code == 2 and f"{out / 'c1' / 'stray.yaml'}: error: -o: gpuc did not write this file" in refused.err
    assert old_claim.exists() and (out / "c2").exists(), "a refused render changes nothing"
    (out / "c1" / "stray.yaml").unlink()
    render(path, out)
    assert not old_claim.exists()
    assert not (out / "c2").exists(), "a cluster removed from the fleet loses its rendered directory"
    assert (out / "not-gpuc" / "keep.txt").read_text() == "mine", "directories gpuc did not write are left alone"
    assert len(list((out / "c1").glob("3-resourceclaimtemplate-*"))) == 1


def test_single_cluster_render_leaves_other_clusters(fleet, tmp_path):
    path = fleet(clusters=[cluster_doc("c1"), cluster_doc("c2")])
    out = tmp_path / "out"
    render(path, out)
    before = read_tree(out / "c2")
    render(path, out, "--cluster", "c1")
    assert read_tree(out / "c2") == before


def test_failure_while_writing_leaves_the_previous_tree(fleet, tmp_path, monkeypatch):
    path = fleet(clusters=[cluster_doc("c1"), cluster_doc("c2")], workloads={"w.yaml": [workload_doc()]})
    out = tmp_path / "out"
    render(path, out)
    before = read_tree(out)
    (path / "workloads" / "w.yaml").write_text(yaml.safe_dump(workload_doc(gpu={"count": 4})))
    calls = {"n": 0}
    real_write = staging.write_file

    def failing_write(path, text):
        calls["n"] += 1
        if calls["n"] == 2:  # unchanged files are linked, not written: c1 and c2 each write a new claim
            raise OSError(28, "No space left on device")
        return real_write(path, text)

    monkeypatch.setattr(staging, "write_file", failing_write)
    result = gpuc("render", path, "-o", out)
    assert result.code == 2 and "No space left on device; the previous tree is unchanged" in result.err
    assert read_tree(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(staging.TMP_PREFIX)]


def test_failure_while_swapping_restores_every_cluster(fleet, tmp_path, monkeypatch):
    path = fleet(clusters=[cluster_doc("c1"), cluster_doc("c2")], workloads={"w.yaml": [workload_doc()]})
    out = tmp_path / "out"
    render(path, out)
    before = read_tree(out)
    (path / "workloads" / "w.yaml").write_text(yaml.safe_dump(workload_doc(gpu={"count": 4})))
    real_rename = os.rename
    failed = []

    def failing_rename(src, dst):
        if Path(dst) == out / "c2" and Path(src).parent.name == "new" and not failed:
            failed.append(src)  # the new c2 cannot be moved in: c1 is already swapped, c2 moved aside
            raise OSError(5, "I/O error")
        return real_rename(src, dst)

    monkeypatch.setattr(staging.os, "rename", failing_rename)
    assert gpuc("render", path, "-o", out).code == 2
    assert failed
    assert read_tree(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(staging.TMP_PREFIX)]


def test_leftovers_of_a_killed_render_are_cleaned(fleet, tmp_path):
    out = tmp_path / "out"
    (out / (staging.TMP_PREFIX + "abc") / "new" / "c1").mkdir(parents=True)
    render(fleet(), out)
    assert sorted(p.name for p in out.iterdir()) == ["c1"]


def test_rendered_files_carry_the_do_not_edit_marker(tmp_path):
    render(EXAMPLES, tmp_path / "out")
    for name in ("kustomization.yaml", "node-labels.yaml", "values/nvidia-dra-driver-gpu.yaml", "argocd/kustomization.yaml"):
        assert (tmp_path / "out" / "prod-east" / name).read_text().startswith(staging.MARKER)


def test_render_never_replaces_what_gpuc_did_not_write(tmp_path):
    out = tmp_path / "out"
    (out / "prod-east").mkdir(parents=True)
    (out / "prod-east" / "handwritten.yaml").write_text("kind: ConfigMap\n")
    (out / "staging").write_text("a file where a cluster directory goes\n")
    result = gpuc("render", EXAMPLES, "-o", out, "--output", "json")
    assert result.code == 2
    report = json.loads(result.out)
    assert sorted(d["file"] for d in report["diagnostics"]) == [str(out / "prod-east"), str(out / "staging")]
    assert "holds files gpuc did not write" in report["diagnostics"][0]["message"]
    assert (out / "prod-east" / "handwritten.yaml").read_text() == "kind: ConfigMap\n"
    assert sorted(p.name for p in out.iterdir()) == ["prod-east", "staging"]


def test_render_into_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "out"
    target.write_text("x")
    result = gpuc("render", EXAMPLES, "-o", target, "--output", "json")
    assert result.code == 2 and json.loads(result.out)["diagnostics"][0]["message"] == "is a file; gpuc renders into a directory"


def test_builds_report_progress_in_cluster_order(tmp_path):
    from compiler.pipeline import CompileOptions, compile_fleet

    for jobs in (1, 2):  # in-process, and forked workers
        seen: list[tuple[int, int]] = []
        built = compile_fleet(EXAMPLES, CompileOptions(keep=False, jobs=jobs), built=lambda done, total, seen=seen: seen.append((done, total)))
        assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
        assert list(built.clusters) == ["lab", "prod-east", "staging", "west"]


def test_forked_workers_stage_nothing_visible_when_one_cluster_fails(fleet, tmp_path):
    """Workers write their clusters into a staging directory: a failure in another worker must leave
    the previous tree exactly as it was and no staging directory behind."""
    clusters = [cluster_doc("c1"), cluster_doc("c2")]
    good = fleet(clusters=clusters, workloads={"w.yaml": [workload_doc("w", gpu={"count": 1})]})
    out = tmp_path / "out"
    assert gpuc("render", good, "-o", out, "--jobs", "2").code == 0
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    unmatched = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B300'"
    bad = fleet(clusters=clusters, workloads={"w.yaml": [workload_doc("w", gpu={"count": 1}),
                                                         workload_doc("x", clusters=["c2"], gpu={"count": 1, "require": {"cel": [unmatched]}})]})
    result = gpuc("render", bad, "-o", out, "--jobs", "2")
    assert result.code == 1 and "matches none" in result.err
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == ["c1", "c2"]


def test_workload_rule_errors_found_while_workers_build_discard_the_builds(fleet, tmp_path):
    """With workers, the workload rules run while the clusters already build. A fleet that fails them is
    bad input (exit 2) with the rule's finding only: what the builds found (the claim's class missing on
    the cluster, exit 1) is never read, and the previous tree stays as it was."""
    clusters = [cluster_doc("c1"), cluster_doc("c2")]
    good = fleet(clusters=clusters, workloads={"w.yaml": [workload_doc("w", gpu={"count": 1})]})
    out = tmp_path / "out"
    assert gpuc("render", good, "-o", out, "--jobs", "2").code == 0
    before = read_tree(out)
    bad = fleet(clusters=clusters, workloads={"w.yaml": [workload_doc("w", gpu={"count": 1}),
                                                         workload_doc("x", gpu={"count": 1, "class": "no-such-class"})]})
    for jobs in ("1", "2"):
        result = gpuc("render", bad, "-o", out, "--jobs", jobs)
        assert result.code == 2 and "unknown device class 'no-such-class'" in result.err, result.err
        assert "Traceback" not in result.err and "does not exist on cluster" not in result.err
        assert read_tree(out) == before
        assert sorted(p.name for p in out.iterdir()) == ["c1", "c2"]


def test_an_unknown_cluster_option_does_not_hide_mistakes_in_the_fleet(fleet, tmp_path):
    bad = fleet(clusters=[cluster_doc("c1")], workloads={"w.yaml": [workload_doc("w", clusters=["c11"], gpu={"count": 1})]})
    result = gpuc("render", bad, "-o", tmp_path / "out", "--cluster", "nope")
    assert result.code == 2 and "unknown cluster 'c11'" in result.err, result.err
