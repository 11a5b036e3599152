"""A newcomer's first hour and CI's: a quiet example, README snippets that compile, paths that open,
a diff that never crashes as "gate tripped", and the discoverability commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, REPO, cluster_doc, gpuc, workload_doc, write_fleet


def test_the_readmes_first_command_prints_no_warning(tmp_path):
    result = subprocess.run([sys.executable, "-m", "compiler", "render", "intents", "-o", str(tmp_path / "rendered")], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


# ------------------------------------------------------------------------------------- README snippets

def _yaml_snippets() -> list[tuple[int, str]]:
    text = (REPO / "README.md").read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1)) for m in re.finditer(r"```yaml\n(.*?)```", text, re.S)]


SNIPPET_CLUSTER = cluster_doc("snippets", kubernetes="1.36", driver="0.5.1", pools=[
    {"name": "h200", "nodes": 2, "gpu": {"model": "H200-141GB", "count": 8}},
    {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}])


def test_every_yaml_snippet_of_the_readme_validates(tmp_path):
    """Whole documents go into a fleet as they are; `gpu:` fragments become the gpu block of a workload on a
    cluster recent enough for them. The fleet must validate with no error."""
    snippets = _yaml_snippets()
    assert len(snippets) >= 5
    clusters, workloads = [SNIPPET_CLUSTER], {}
    for line, text in snippets:
        doc = yaml.safe_load(text)
        if doc.get("apiVersion") == "gpuc.dev/v1alpha1":
            if doc["kind"] == "Cluster":
                clusters.append(doc)
            else:
                workloads[f"readme-{line}.yaml"] = text
        else:
            assert set(doc) == {"gpu"}, f"README line {line}: a snippet gpuc cannot place: {text}"
            workloads[f"readme-{line}.yaml"] = [workload_doc(f"readme-{line}", clusters=["snippets"], **doc)]
    root = write_fleet(tmp_path / "fleet", clusters, workloads)
    result = gpuc("validate", root)
    assert result.code == 0, result.err
    assert ": error:" not in result.err


# ------------------------------------------------------------------------------------- paths, crashes

def test_paths_are_relative_to_the_working_directory(tmp_path, monkeypatch):
    root = write_fleet(tmp_path / "fleet", [cluster_doc()], {"w.yaml": [workload_doc(gpu={"sharng": "MPS"})]})
    monkeypatch.chdir(tmp_path)
    assert gpuc("validate", "fleet").err.startswith("fleet/workloads/w.yaml:8: error: spec.gpu.sharng")
    monkeypatch.chdir(root / "workloads")
    assert gpuc("validate", "..").err.startswith("w.yaml:8: error: spec.gpu.sharng")
    data = json.loads(gpuc("validate", "..", "--output", "json").out)
    assert data["diagnostics"][0]["file"] == "w.yaml"


def test_diff_at_the_root_of_its_repository(tmp_path):
    root = write_fleet(tmp_path / "repo", [cluster_doc()], {"w.yaml": [workload_doc(gpu={"count": 1})]})
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)
    (root / "workloads" / "w.yaml").write_text(yaml.safe_dump(workload_doc(replicas=2, gpu={"count": 1})))
    result = subprocess.run(["gpuc", "diff", ".", "--base", "HEAD"], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "replicas" in result.stdout or "1 -> 2" in result.stdout


def test_a_crash_is_exit_2_with_one_line_never_1(fleet, monkeypatch):
    import compiler.pipeline

    def broken(*args, **kwargs):
        raise RuntimeError("git exploded")

    monkeypatch.setattr(compiler.pipeline, "compile_fleet", broken)
    root = fleet()
    result = gpuc("diff", root, "--base", "HEAD", "--fail-on", "any")
    assert result.code == 2
    assert result.err.startswith("gpuc: internal error in `gpuc diff`: RuntimeError: git exploded")
    assert "Traceback" not in result.err and "GPUC_DEBUG=1" in result.err
    monkeypatch.setenv("GPUC_DEBUG", "1")
    with pytest.raises(RuntimeError):
        gpuc("diff", root, "--base", "HEAD")


# ------------------------------------------------------------------------------------- acknowledgements, schemas

def test_an_acknowledged_warning_is_not_printed(fleet):
    doc = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"})
    noisy = gpuc("validate", fleet(clusters=[doc]), "--output", "json")
    (warning,) = [w for w in json.loads(noisy.out)["warnings"] if w.get("code") == "driver-fork"]
    assert "spec.acknowledge: [{warning: driver-fork, reason: ...}]" in warning["hint"]
    doc["spec"]["acknowledge"] = [{"warning": "driver-fork", "reason": "we run the fork in staging"}]
    quiet = gpuc("validate", fleet(clusters=[doc]), "--output", "json")
    assert [w for w in json.loads(quiet.out)["warnings"] if w.get("code") == "driver-fork"] == []
    doc["spec"]["acknowledge"] = [{"warning": "driver-fork"}]
    assert "spec.acknowledge[0].reason" in gpuc("validate", fleet(clusters=[doc])).err
    doc["spec"]["acknowledge"] = [{"warning": "driver-forks", "reason": "x"}]
    wrong = gpuc("validate", fleet(clusters=[doc]))
    assert wrong.code == 2 and "driver-fork" in wrong.err


def test_argo_cd_applications_are_checked_against_gpucs_own_schema():
    from check_support import example_cluster, find, run_checks

    compiled = example_cluster("prod-east")
    app = next(o for o in compiled.gitops if o.kind == "Application")
    app.manifest["spec"]["syncPolicy"]["retry"]["limit"] = "5"
    app.manifest["spec"]["destination"]["nmae"] = "prod-east"
    errors = [d.message for d in run_checks(compiled) if d.severity == "error"]
    assert any("limit" in m for m in errors), errors
    assert any("nmae" in m for m in errors), errors
    assert find  # the helper module is the one the other check tests use


# ------------------------------------------------------------------------------------- discoverability

def test_version_and_bare_gpuc():
    version = subprocess.run(["gpuc", "--version"], capture_output=True, text=True, check=False)
    assert version.returncode == 0 and re.fullmatch(r"gpuc \d+\.\d+\.\d+\n", version.stdout)
    bare = subprocess.run(["gpuc"], capture_output=True, text=True, check=False)
    assert bare.returncode == 0 and bare.stdout.startswith("usage: gpuc") and "render" in bare.stdout


def test_examples_path_exists():
    assert os.path.isdir(EXAMPLES) and Path(EXAMPLES, "clusters").is_dir()
