"""The incremental build: clusters whose inputs did not change come from the cache, and the tree is always
byte-identical to a cold render of the same fleet."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLES, gpuc


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    fleet = shutil.copytree(EXAMPLES, tmp_path / "fleet")
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUC_CACHE_DIR", str(cache))
    return fleet, tmp_path / "out", cache


def render(fleet: Path, out: Path, *extra: str):
    result = gpuc("render", fleet, "-o", out, *extra)
    assert result.code == 0, result.err
    return result


def fresh(fleet: Path, where: Path) -> dict[str, bytes]:
    render(fleet, where, "--no-cache")
    return tree(where)


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json") if not p.name.startswith("index-"))


def test_a_warm_render_after_a_change_is_byte_identical_to_a_cold_one(setup, tmp_path):
    fleet, out, cache = setup
    cold = render(fleet, out)
    assert len(entries(cache)) == 4  # one per cluster
    west = os.stat(out / "west").st_ino
    (fleet / "workloads" / "lab-only.yaml").write_text(
        "apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: probe, namespace: research}\n"
        "spec:\n  clusters: [lab]\n  replicas: 2\n  gpu: {count: 1}\n")
    warm = render(fleet, out)
    assert tree(out) == fresh(fleet, tmp_path / "fresh")
    assert os.stat(out / "west").st_ino == west  # west's workloads did not change: its directory stayed as it was
    assert warm.err == cold.err == ""
    lab = render(fleet, tmp_path / "again", "--no-cache").out.replace(str(tmp_path / "again"), "OUT")
    assert warm.out.replace(str(out), "OUT") == lab and "lab: 6 objects" in lab  # the new workload's template


def test_warnings_of_cached_clusters_are_printed_as_a_full_build_prints_them(setup, tmp_path):
    fleet, out, _ = setup
    for path in (fleet / "clusters").glob("*.yaml"):
        path.write_text(path.read_text().split("  acknowledge:")[0])
    first = render(fleet, out)
    assert "[unchecked-crds]" in first.err and "[driver-fork]" in first.err
    second = render(fleet, out)  # every cluster from the cache
    assert second.err == first.err
    assert json.loads(gpuc("render", fleet, "-o", out, "--output", "json").out)["warnings"] == \
        json.loads(gpuc("render", fleet, "-o", tmp_path / "x", "--output", "json", "--no-cache").out)["warnings"]


def test_a_corrupt_or_foreign_cache_is_ignored_with_a_note(setup, tmp_path):
    fleet, out, cache = setup
    render(fleet, out)
    first, second, *_ = entries(cache)
    first.write_text("{not json")
    raw = json.loads(second.read_text())
    raw["files"] = {k: "0" * 32 for k in raw["files"]}  # a tampered entry: the checksum no longer holds
    second.write_text(json.dumps(raw))
    result = render(fleet, out)
    assert f"gpuc: note: cache entry {first.name} ignored:" in result.err
    assert f"gpuc: note: cache entry {second.name} ignored: checksum mismatch" in result.err
    assert tree(out) == fresh(fleet, tmp_path / "fresh")
    index = next(cache.rglob("index-*.json"))
    index.write_text(json.dumps({"format": "gpuc-cache-0", "files": {}}))
    assert "cache index" in render(fleet, out).err and tree(out) == tree(tmp_path / "fresh")


def test_an_output_tree_edited_by_hand_is_rebuilt_not_trusted(setup, tmp_path):
    fleet, out, _ = setup
    render(fleet, out)
    victim = next((out / "prod-east").glob("*.yaml"))
    original = victim.read_bytes()
    victim.write_bytes(original + b"# edited\n")
    (out / "west" / "stray.yaml").write_text("kind: ConfigMap\n")
    refused = gpuc("render", fleet, "-o", out)  # the cache does not hide a file gpuc did not write
    assert refused.code == 2 and str(out / "west" / "stray.yaml") in refused.err
    (out / "west" / "stray.yaml").unlink()
    render(fleet, out)
    assert victim.read_bytes() == original
    assert tree(out) == fresh(fleet, tmp_path / "fresh")


def test_a_fresh_checkout_of_the_tree_is_matched_by_content(setup, tmp_path):
    """CI checks out rendered/ (new inodes and mtimes): the entries match it by digest, then learn its stamps."""
    fleet, out, cache = setup
    render(fleet, out)
    checkout = tmp_path / "checkout"
    shutil.copytree(out, checkout, copy_function=shutil.copyfile)
    shutil.rmtree(out)
    checkout.rename(out)
    inode = os.stat(out / "lab").st_ino
    render(fleet, out)
    assert os.stat(out / "lab").st_ino == inode  # taken from the cache: left in place
    assert tree(out) == fresh(fleet, tmp_path / "fresh")


def test_no_cache_reads_and_writes_nothing(setup):
    fleet, out, cache = setup
    render(fleet, out, "--no-cache")
    assert not cache.exists()
    render(fleet, out, "--cache-dir", str(cache.parent / "elsewhere"))
    assert (cache.parent / "elsewhere").is_dir() and not cache.exists()


def test_a_duplicate_across_clusters_falls_back_to_the_full_build_that_reports_it(setup):
    fleet, out, _ = setup
    render(fleet, out)
    west = next((fleet / "workloads").rglob("*.yaml"))
    copy = west.parent / "copy.yaml"
    copy.write_text(west.read_text())
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 2 and "duplicate" in result.err


def test_a_change_of_gpuc_itself_misses_every_cluster(setup, monkeypatch):
    fleet, out, cache = setup
    render(fleet, out)
    import compiler.cache.plan as plan

    monkeypatch.setattr(plan, "build_digest", lambda: "another-gpuc")
    before = set(entries(cache))
    render(fleet, out)
    assert len(set(entries(cache)) - before) == 4  # four new keys: nothing was taken from the old ones


def test_diff_reports_clusters_with_the_same_inputs_unchanged_without_compiling_them(tmp_path, monkeypatch):
    import subprocess

    import compiler.pipeline

    from conftest import cluster_doc, workload_doc, write_fleet

    repo = tmp_path / "repo"
    fleet = write_fleet(repo / "fleet", [cluster_doc("a"), cluster_doc("b")],
                        {"a.yaml": [workload_doc("wa", clusters=["a"], replicas=1, gpu={"count": 1})],
                         "b.yaml": [workload_doc("wb", clusters=["b"], gpu={"count": 1})]})
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    render(fleet, tmp_path / "out")  # what CI's render of main leaves in the cache
    (fleet / "workloads" / "a.yaml").write_text((fleet / "workloads" / "a.yaml").read_text().replace("replicas: 1", "replicas: 2"))
    built: list[str] = []
    real = compiler.pipeline.compile_cluster
    monkeypatch.setattr(compiler.pipeline, "compile_cluster", lambda cluster, f: built.append(cluster.name) or real(cluster, f))
    cached = gpuc("diff", fleet, "--base", "HEAD", "--output", "json")
    assert cached.code == 0, cached.err
    assert sorted(built) == ["a", "a"]  # base and head of the changed cluster; b not at all
    report = {c["cluster"]: c for c in json.loads(cached.out)["clusters"]}
    assert report["b"]["status"] == "unchanged" and report["b"]["feasible"] == {"before": True, "after": True}
    assert report["a"]["status"] == "changed"
    built.clear()
    full = gpuc("diff", fleet, "--base", "HEAD", "--no-cache")
    assert sorted(built) == ["a", "a", "b", "b"]
    assert full.out == gpuc("diff", fleet, "--base", "HEAD").out  # the Markdown is the same either way
