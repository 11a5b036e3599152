"""A warm cache is never more permissive than a cold build: whatever the cache holds (stale, tampered or
impossible), `render` and `diff` give what `--no-cache` gives. Each test changes one kind of key input, or
damages the cache one way, and compares the cached run with a cold one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import cluster_doc, gpuc, workload_doc, write_fleet

CLASS = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "big.gpuc.dev"},
         "spec": {"require": {"architecture": ["Hopper"], "minMemory": "79Gi"}}}
GHOST = ("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: ghost, namespace: team}\n"
         "spec:\n  clusters: [nowhere]\n  replicas: 1\n  gpu: {count: 1}\n")
TOKEN = "ghp_" + "A1b2C3d4E5f6" * 3


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def small(tmp_path):
    """Two clusters, a device class and a workload file each, rendered once (the cache is warm)."""
    fleet = write_fleet(tmp_path / "repo" / "fleet", [cluster_doc("a"), cluster_doc("b")],
                        {"a.yaml": [workload_doc("wa", clusters=["a"], replicas=1, gpu={"count": 1})],
                         "b.yaml": [workload_doc("wb", clusters=["b"], gpu={"count": 1})],
                         "classes.yaml": [CLASS]})
    out = tmp_path / "out"
    first = gpuc("render", fleet, "-o", out)
    assert first.code == 0, first.err
    return fleet, out


def same_as_cold(fleet: Path, out: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    """Render warm into `out` and cold elsewhere; the exit codes, errors and trees must agree."""
    warm = gpuc("render", fleet, "-o", out, *extra)
    cold = gpuc("render", fleet, "-o", tmp_path / "cold", "--no-cache", *extra)
    assert warm.code == cold.code, (warm.err, cold.err)
    strip = [line for line in warm.err.splitlines() if not line.startswith("gpuc: note:")]
    assert "\n".join(strip) == cold.err.rstrip("\n")
    if cold.code == 0:
        assert tree(out) == tree(tmp_path / "cold")
    return warm.code, warm.err


@pytest.mark.parametrize("text", [GHOST, GHOST.replace("gpu: {count: 1}", "gpu: {count: 1}\n  env: {TOKEN: " + TOKEN + "}")])
def test_a_new_file_no_cluster_key_reaches_is_still_validated(small, tmp_path, text):
    fleet, out = small
    (fleet / "workloads" / "ghost.yaml").write_text(text)
    code, err = same_as_cold(fleet, out, tmp_path)
    assert code == 2 and ("unknown cluster 'nowhere'" in err or "looks like a" in err) and TOKEN not in err


def test_a_tampered_index_cannot_drop_a_workload(small, tmp_path, monkeypatch):
    fleet, out = small
    cache = Path(__import__("os").environ["GPUC_CACHE_DIR"])
    (fleet / "workloads" / "ghost.yaml").write_text(GHOST)
    assert gpuc("render", fleet, "-o", out).code == 2
    index = next(cache.rglob("index-*.json"))
    raw = json.loads(index.read_text())
    from compiler.cache.keys import digest

    raw["files"]["workloads/ghost.yaml"] = [digest(GHOST.encode()), []]  # "validated, and holds nothing"
    index.write_text(json.dumps(raw))
    code, err = same_as_cold(fleet, out, tmp_path)
    assert code == 2 and "cache index" in err and "checksum mismatch" in err


def impossible_entries(entry: dict) -> list[dict]:
    """Entries with a valid checksum whose content no build writes."""
    from compiler.cache.store import _sealed

    body = {k: v for k, v in entry.items() if k != "checksum"}
    out = []
    for field, value in [("counts", [1, 2]), ("counts", {**body["counts"], "objects": -1}), ("files", {"../../escape.yaml": "0" * 32}),
                         ("files", {}), ("stamps", {k: [1] for k in body["files"]}), ("warnings", [["f", "x", "p", "m", "h", "warning", ""]]),
                         ("warnings", [["f", 1, "p", "m", "h", "error", ""]]), ("cluster", "other")]:
        out.append(_sealed({**body, field: value}))
    return out


def test_an_entry_with_a_valid_checksum_but_impossible_content_is_a_note_and_a_miss(small, tmp_path):
    fleet, out = small
    cache = Path(__import__("os").environ["GPUC_CACHE_DIR"])
    path = next(p for p in cache.rglob("a-*.json"))
    original = json.loads(path.read_text())
    for bad in [*impossible_entries(original), "[" * 100_000 + "]" * 100_000]:
        path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
        code, err = same_as_cold(fleet, out, tmp_path)
        assert code == 0 and f"cache entry {path.name} ignored" in err, err
        path.write_text(json.dumps(original))


def test_an_index_nested_past_the_recursion_limit_is_a_note(small, tmp_path):
    fleet, out = small
    cache = Path(__import__("os").environ["GPUC_CACHE_DIR"])
    next(cache.rglob("index-*.json")).write_text("[" * 100_000 + "]" * 100_000)
    code, err = same_as_cold(fleet, out, tmp_path)
    assert code == 0 and "cache index" in err


@pytest.mark.parametrize("change", ["cluster", "class", "workload-target"])
def test_each_key_input_changed_gives_the_cold_result(small, tmp_path, change):
    fleet, out = small
    if change == "cluster":  # b's pool shrinks to a node without GPUs for its workload
        path = fleet / "clusters" / "b.yaml"
        path.write_text(path.read_text().replace("count: 8", "count: 1").replace("nodes: 2", "nodes: 1"))
        (fleet / "workloads" / "b.yaml").write_text((fleet / "workloads" / "b.yaml").read_text().replace("count: 1", "count: 2"))
    elif change == "class":  # a class no GPU matches, that a's workload now asks for
        path = fleet / "workloads" / "classes.yaml"
        path.write_text(path.read_text().replace("Hopper", "Blackwell"))
        wa = fleet / "workloads" / "a.yaml"
        wa.write_text(wa.read_text().replace("count: 1\n", "count: 1\n    class: big.gpuc.dev\n", 1))
    else:  # b's workload now also runs on a, with a replica count a cannot hold
        wb = fleet / "workloads" / "b.yaml"
        wb.write_text(wb.read_text().replace("- b", "- a\n  - b").replace("gpu:", "replicas: 40\n  gpu:"))
    code, _ = same_as_cold(fleet, out, tmp_path)
    assert code != 0


def test_every_fact_data_file_of_gpuc_is_a_key_input(tmp_path, monkeypatch):
    """A cache written by a gpuc with another fact table never matches: each data file is part of build_digest."""
    import compiler.cache.keys as keys

    package = shutil.copytree(keys.PACKAGE, tmp_path / "compiler", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(keys, "PACKAGE", package)
    keys.build_digest.cache_clear()
    try:
        before = keys.build_digest()
        for data in sorted((package / "facts" / "data").glob("*.yaml")):
            original = data.read_bytes()
            data.write_bytes(original + b"\n# edited\n")
            keys.build_digest.cache_clear()
            assert keys.build_digest() != before, data.name
            data.write_bytes(original)
    finally:
        keys.build_digest.cache_clear()


def git_commit(repo: Path, message: str) -> None:
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    if not (repo / ".git").exists():
        subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", message], cwd=repo, check=True)


@pytest.mark.parametrize("change", ["cluster", "class", "ghost"])
def test_diff_with_the_head_cached_gives_the_cold_result(small, change):
    """The head is rendered (cached); the base differs in one key input: diff agrees with --no-cache."""
    fleet, out = small
    repo = fleet.parent
    if change == "cluster":
        path = fleet / "clusters" / "a.yaml"
        head = path.read_text()
        path.write_text(head.replace("nodes: 2", "nodes: 3"))
    elif change == "class":
        path = fleet / "workloads" / "classes.yaml"
        head = path.read_text()
        path.write_text(head.replace("79Gi", "40Gi"))
    else:
        path = fleet / "workloads" / "ghost.yaml"
        head = None
        path.write_text(GHOST.replace("nowhere", "a"))
    git_commit(repo, "base")
    if head is None:
        path.unlink()
    else:
        path.write_text(head)
    assert gpuc("render", fleet, "-o", out).code == 0  # the head is in the cache
    warm, cold = gpuc("diff", fleet, "--base", "HEAD", "--fail-on", "any"), gpuc("diff", fleet, "--base", "HEAD", "--no-cache", "--fail-on", "any")
    assert (warm.code, warm.out) == (cold.code, cold.out) and cold.code == 1  # the Markdown, and the gate tripped

    def statuses(*extra: str) -> dict[str, str]:
        return {c["cluster"]: c["status"] for c in json.loads(gpuc("diff", fleet, "--base", "HEAD", "--output", "json", *extra).out)["clusters"]}

    assert statuses() == statuses("--no-cache") and "changed" in statuses().values()


def test_diff_reads_a_new_head_file_no_key_reaches(small):
    fleet, out = small
    git_commit(fleet.parent, "base")
    (fleet / "workloads" / "ghost.yaml").write_text(GHOST)
    warm, cold = gpuc("diff", fleet, "--base", "HEAD", "--fail-on", "any"), gpuc("diff", fleet, "--base", "HEAD", "--fail-on", "any", "--no-cache")
    assert warm.code == cold.code == 2 and "unknown cluster 'nowhere'" in warm.err


def test_a_cluster_sharing_a_workload_file_is_rebuilt_when_the_others_files_change(tmp_path):
    """a's entry keeps what b's build found about the file both share (here: its pod does not fit on b, a warning
    with --allow-infeasible); when b's own workloads change that finding goes, and a must not replay it."""
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("a"), cluster_doc("b")],
                        {"shared.yaml": [workload_doc("w", clusters=["a", "b"], gpu={"count": 1})],
                         "fill.yaml": [workload_doc("fill", clusters=["b"], replicas=2, gpu={"count": 8})]})
    out = tmp_path / "out"
    first = gpuc("render", fleet, "-o", out, "--allow-infeasible")
    assert first.code == 0 and "shared.yaml" in first.err, first.err
    fill = fleet / "workloads" / "fill.yaml"
    fill.write_text(fill.read_text().replace("replicas: 2", "replicas: 1"))
    code, err = same_as_cold(fleet, out, tmp_path, "--allow-infeasible")
    assert code == 0 and "shared.yaml" not in err


@pytest.mark.parametrize("where", ["spec.crds", "--crds"])
def test_a_changed_crd_file_gives_the_cold_result(small, tmp_path, where):
    fleet, out = small
    crds = fleet / "crds"
    crds.mkdir()
    (crds / "notes.yaml").write_text("# CRDs of the operators this cluster runs\n")
    extra: tuple[str, ...] = ("--crds", str(crds)) if where == "--crds" else ()
    if where == "spec.crds":
        path = fleet / "clusters" / "a.yaml"
        path.write_text(path.read_text() + "  crds: crds\n")
    assert gpuc("render", fleet, "-o", out, *extra).code == 0
    (crds / "notes.yaml").write_text("kind: CustomResourceDefinition\nspec: [unclosed\n")
    code, err = same_as_cold(fleet, out, tmp_path, *extra)
    assert code == 2 and "invalid YAML in CRD file" in err


def test_a_changed_option_gives_the_cold_result(tmp_path):
    """Each option a cluster's findings depend on is part of its key: a tree rendered with one is no hit for another."""
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("a")],
                        {"big.yaml": [workload_doc("big", clusters=["a"], replicas=3, gpu={"count": 8})]})
    out = tmp_path / "out"
    assert gpuc("render", fleet, "-o", out, "--allow-infeasible").code == 0  # three 8-GPU pods on two nodes: a warning
    assert same_as_cold(fleet, out, tmp_path)[0] == 1
    from test_check_cli import _nim_fleet

    nim = _nim_fleet(tmp_path / "nim", 1)
    assert gpuc("render", nim, "-o", out).code == 0  # no CRD for the NIM kinds: a warning
    assert same_as_cold(nim, out, tmp_path, "--require-crds")[0] != 0


def test_a_changed_running_cluster_gives_the_cold_result(tmp_path):
    """--state is a key input: the same fleet planned on a cluster whose GPUs other claims hold does not fit."""
    import kubectl
    from test_cluster_state import cluster_items, fleet_of, held

    fleet = fleet_of(tmp_path / "fleet", [workload_doc("llm", gpu={"count": 1})])
    free, full = tmp_path / "free.yaml", tmp_path / "full.yaml"
    free.write_text(kubectl.yaml_export(cluster_items(fleet)))
    full.write_text(kubectl.yaml_export(cluster_items(fleet) + [held("a", "h100-0", range(8)), held("b", "h100-1", range(8))]))
    out = tmp_path / "out"
    assert gpuc("render", fleet, "-o", out, "--cluster", "c1", "--state", free).code == 0
    assert same_as_cold(fleet, out, tmp_path, "--cluster", "c1", "--state", full)[0] == 1


def test_a_build_judged_against_the_previous_tree_is_not_remembered(tmp_path):
    """A render that replaced an object said so because of the tree it replaced; the next render of the same
    fleet replaces nothing, and must not replay that from the cache."""
    from test_check_cli import _nim_fleet

    out = tmp_path / "out"
    assert gpuc("render", _nim_fleet(tmp_path / "one", 1), "-o", out).code == 0
    two = _nim_fleet(tmp_path / "two", 2)
    assert gpuc("render", two, "-o", out).code == 1  # the NIMService's claim changes: refused without --allow-replace
    replaced = gpuc("render", two, "-o", out, "--allow-replace")
    assert replaced.code == 0, replaced.err
    code, err = same_as_cold(two, out, tmp_path, "--allow-replace")
    assert code == 0


def test_a_single_cluster_render_is_as_strict_as_a_cold_one_about_the_other_clusters(tmp_path):
    """A cold `render --cluster a` runs every cluster's rules over the fleet: a warm one may not skip a changed file
    of b's because a's entry is a hit."""
    from conftest import NIM_SECRETS, nim_model

    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("a"), cluster_doc("b", kubernetes="1.33")],
                        {"a.yaml": [workload_doc("wa", clusters=["a"], gpu={"count": 1})],
                         "b.yaml": [workload_doc("wb", clusters=["b"], gpu={"count": 1})]})
    out = tmp_path / "out"
    assert gpuc("render", fleet, "-o", out).code == 0
    (fleet / "workloads" / "b.yaml").write_text(yaml.safe_dump(  # NIM Operator 3.1 on 1.33 cannot read claims: a rule about b
        workload_doc("wb", clusters=["b"], gpu={"count": 1}, model=nim_model(), secrets=NIM_SECRETS)))
    warm = gpuc("render", fleet, "-o", out, "--cluster", "a")
    cold = gpuc("render", fleet, "-o", tmp_path / "cold", "--cluster", "a", "--no-cache")
    assert (warm.code, warm.err) == (cold.code, cold.err) and cold.code == 2 and "use NIM Operator 3.0.x (before 3.1.0) on this cluster" in cold.err


def test_a_cluster_whose_feasibility_differs_is_never_reported_unchanged(tmp_path):
    """What the diff shows decides what the cache may skip: the same objects with a pod that no longer fits are a change."""
    from compiler.emit.diff.compare import compare
    from compiler.pipeline import CompileOptions, compile_fleet

    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("a")], {"a.yaml": [workload_doc("wa", clusters=["a"], gpu={"count": 1})]})
    base, head = (compile_fleet(fleet, CompileOptions(detail=True)) for _ in range(2))
    assert compare(base, head, "HEAD").clusters[0].status == "unchanged"
    head.clusters["a"].unplaced = 1
    assert compare(base, head, "HEAD").clusters[0].status == "changed"


def test_a_changed_file_that_moves_to_an_unknown_cluster_is_still_validated(small, tmp_path):
    fleet, out = small
    ghost = fleet / "workloads" / "ghost.yaml"
    ghost.write_text(GHOST.replace("nowhere", "a"))
    assert gpuc("render", fleet, "-o", out).code == 0  # validated and in the index
    ghost.write_text(GHOST)
    code, err = same_as_cold(fleet, out, tmp_path)
    assert code == 2 and "unknown cluster 'nowhere'" in err


def test_the_running_cluster_is_part_of_the_options_a_key_digests(tmp_path):
    """Renders with --state are not cached today (the test above holds either way); the key is ready if they are."""
    import kubectl
    from test_cluster_state import cluster_items, fleet_of, held

    from compiler.cache.plan import Settings
    from compiler.load.state import read_state

    fleet = fleet_of(tmp_path / "fleet", [workload_doc("llm", gpu={"count": 1})])
    free, full = tmp_path / "free.yaml", tmp_path / "full.yaml"
    free.write_text(kubectl.yaml_export(cluster_items(fleet)))
    full.write_text(kubectl.yaml_export(cluster_items(fleet) + [held("a", "h100-0", range(8))]))
    options = [Settings.of("c1", False, False, False, read_state([str(p)]), ()).options for p in (free, full)]
    assert options[0] != options[1]
