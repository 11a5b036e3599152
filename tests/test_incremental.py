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
    # the files each side's load reads, and the files scanned for the plans: the base (a copy of the fleet at the
    # commit, elsewhere) knows its unchanged files from the head's index, so b.yaml is neither read nor scanned
    read: list[str] = []
    real_load = compiler.pipeline.load
    monkeypatch.setattr(compiler.pipeline, "load", lambda root, jobs=None, select=None, keep=None: real_load(
        root, jobs, select=lambda rel: (select is None or select(rel)) and not read.append(rel), keep=keep))
    scanned: list[bytes] = []
    import compiler.cache.plan

    real_scan = compiler.cache.plan.scan
    monkeypatch.setattr(compiler.cache.plan, "scan", lambda data: scanned.append(data) or real_scan(data))
    cached = gpuc("diff", fleet, "--base", "HEAD", "--output", "json")
    assert cached.code == 0, cached.err
    assert sorted(built) == ["a", "a"]  # base and head of the changed cluster; b not at all
    assert "workloads/b.yaml" not in read and "workloads/a.yaml" in read
    assert scanned == [(fleet / "workloads" / "a.yaml").read_bytes()]  # the head's changed file, scanned once
    report = {c["cluster"]: c for c in json.loads(cached.out)["clusters"]}
    assert report["b"]["status"] == "unchanged" and report["b"]["feasible"] == {"before": True, "after": True}
    assert report["a"]["status"] == "changed"
    built.clear()
    full = gpuc("diff", fleet, "--base", "HEAD", "--no-cache")
    assert sorted(built) == ["a", "a", "b", "b"]
    assert full.out == gpuc("diff", fleet, "--base", "HEAD").out  # the Markdown is the same either way


def shared_file_fleet(root: Path) -> Path:
    """Clusters a and b whose workloads share one file: wa, then wb (a pinned-to-nothing NIM image: a warning
    about wb's line), then wa2."""
    from conftest import NIM_SECRETS, cluster_doc, nim_model, workload_doc, write_fleet

    latest = workload_doc("wb", clusters=["b"], model=nim_model(image="nvcr.io/nim/meta/llama-3.1-8b-instruct:latest"),
                          secrets=NIM_SECRETS, gpu={"count": "auto"})
    return write_fleet(root, [cluster_doc("a"), cluster_doc("b")],
                       {"team.yaml": [workload_doc("wa", clusters=["a"], replicas=1, gpu={"count": 1}), latest,
                                      workload_doc("wa2", clusters=["a"], gpu={"count": 1})]})


def test_a_file_shared_by_clusters_rebuilds_only_the_clusters_of_the_changed_document(tmp_path):
    """The cache keys each cluster on the documents that target it: editing a's workload leaves b's output in
    place, and findings stay with the document they point into (no stale warning, no stale line number)."""
    fleet = shared_file_fleet(tmp_path / "fleet")
    team = fleet / "workloads" / "team.yaml"
    out = tmp_path / "out"
    render(fleet, out)
    inode = {name: os.stat(out / name).st_ino for name in ("a", "b")}

    def check(step: str) -> None:
        warm = gpuc("render", fleet, "-o", out)
        cold = gpuc("render", fleet, "-o", tmp_path / step, "--no-cache")
        assert warm.code == cold.code == 0, warm.err
        assert tree(out) == tree(tmp_path / step), step
        assert warm.err.replace(str(out), "OUT") == cold.err.replace(str(tmp_path / step), "OUT"), step

    team.write_text(team.read_text().replace("replicas: 1", "replicas: 2"))  # wa, same lines
    check("replicas")
    assert os.stat(out / "b").st_ino == inode["b"] and os.stat(out / "a").st_ino != inode["a"]
    team.write_text(team.read_text().replace("  replicas: 2\n", "  replicas: 2\n  # doubled for the launch\n", 1))
    check("shifted")  # wa grew a line: wb's warning moved down one, so b is rebuilt
    team.write_text(team.read_text().replace(":latest", ":1.8.3"))  # wb fixed: a's entry holds no warning of wb's
    a_now = os.stat(out / "a").st_ino
    check("fixed")
    assert os.stat(out / "a").st_ino == a_now and "latest" not in gpuc("render", fleet, "-o", out).err


def test_a_workload_targeting_an_unknown_cluster_is_reported_even_when_every_cluster_is_cached(setup):
    fleet, out, _ = setup
    render(fleet, out)
    (fleet / "workloads" / "typo.yaml").write_text(
        "apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: probe, namespace: research}\n"
        "spec:\n  clusters: [lba]\n  gpu: {count: 1}\n")
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 2 and "unknown cluster 'lba'" in result.err


def test_each_document_has_a_digest_of_its_own_lines_and_position():
    from compiler.cache.keys import scan

    text = ("# team file\nkind: GpuWorkload\nmetadata: {name: a}\nspec: {clusters: [x]}\n---\n"
            "kind: GpuWorkload\nmetadata: {name: b}\nspec: {clusters: [y]}\n")
    base = scan(text.encode())
    assert base is not None and [(d.name, d.index) for d in base] == [("a", 0), ("b", 1)]
    edited = scan(text.replace("clusters: [x]}", "clusters: [x], replicas: 2}").encode())
    assert edited is not None and edited[0].span != base[0].span and edited[1].span == base[1].span
    longer = scan(text.replace("# team file\n", "# team file\n# owned by team x\n").encode())
    assert longer is not None and longer[1].span != base[1].span  # same text, other line numbers
    emptied = scan(text.replace("---\n", "---\n---\n").encode())  # an empty document: b is now document 2
    assert emptied is not None and emptied[1].index == 2
    for odd in (text.replace("\n", "\r"), "%YAML 1.1\n---\n" + text):  # line breaks or directives of the whole file
        spans = scan(odd.encode())
        assert spans is not None and spans[0].span == spans[1].span


def test_a_workload_parked_on_no_cluster_is_checked_by_every_build(tmp_path):
    """`clusters: []` targets no cluster, so no key would hold it: it is an input of every cluster instead, and
    a mistake in it still fails the warm render as it fails a cold one."""
    fleet = shared_file_fleet(tmp_path / "fleet")
    parked = fleet / "workloads" / "parked.yaml"
    parked.write_text("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: parked, namespace: team}\n"
                      "spec:\n  clusters: []\n  gpu: {count: 1}\n")
    out = tmp_path / "out"
    render(fleet, out)
    parked.write_text(parked.read_text().replace("count: 1", "count: 1, sharng: MPS"))
    warm, cold = gpuc("render", fleet, "-o", out), gpuc("render", fleet, "-o", tmp_path / "cold", "--no-cache")
    assert warm.code == cold.code == 2 and "unknown field 'sharng'" in warm.err
    assert warm.err.replace(str(out), "OUT") == cold.err.replace(str(tmp_path / "cold"), "OUT")


def test_a_device_class_in_a_shared_file_is_keyed_by_its_document(tmp_path):
    """Every cluster reads the device classes, but by their documents: editing a workload next to a class in
    the same file rebuilds that workload's cluster only; editing the class rebuilds them all."""
    fleet = shared_file_fleet(tmp_path / "fleet")
    team = fleet / "workloads" / "team.yaml"
    team.write_text("apiVersion: gpuc.dev/v1alpha1\nkind: GpuDeviceClass\nmetadata: {name: big.example.com}\n"
                    "spec:\n  require: {minMemory: 79Gi}\n---\n" + team.read_text())
    out = tmp_path / "out"
    render(fleet, out)
    b = os.stat(out / "b").st_ino
    team.write_text(team.read_text().replace("replicas: 1", "replicas: 2"))  # wa, on a
    render(fleet, out)
    assert os.stat(out / "b").st_ino == b and tree(out) == fresh(fleet, tmp_path / "one")
    team.write_text(team.read_text().replace("minMemory: 79Gi", "minMemory: 70Gi"))
    render(fleet, out)
    assert os.stat(out / "b").st_ino != b and tree(out) == fresh(fleet, tmp_path / "two")
