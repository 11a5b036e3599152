"""A newcomer's first hour and CI's: a quiet example, snippets of the README and docs/ that compile, links and paths that open,
a diff that never crashes as "gate tripped", and the discoverability commands."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, REPO, cluster_doc, deep_update, gpuc, workload_doc, write_fleet


def test_the_readmes_first_command_prints_no_warning(tmp_path):
    result = subprocess.run([sys.executable, "-m", "compiler", "render", "intents", "-o", str(tmp_path / "rendered")], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


# ------------------------------------------------------------------------------------- snippets and links of the docs

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _yaml_snippets(page: Path) -> list[tuple[int, str, str]]:
    """The intents a page shows: its yaml blocks, but those a reader appends to a file (a fragment of it) and those that
    are a file other than an intent (a Pulumi project's), which tests/test_doc_commands.py uses."""
    text = re.sub(r"````.*?````", lambda m: "\n" * m.group(0).count("\n"), page.read_text(), flags=re.S)  # a command's output
    out = []
    for m in re.finditer(r"(?:<!-- (file|append): (.+?) -->\n)?```yaml\n(.*?)```", text, re.S):
        marker, target = m.group(1), m.group(2) or ""
        if marker == "append" or (marker == "file" and not target.startswith(("clusters/", "workloads/"))):
            continue
        out.append((text[:m.start(3)].count("\n") + 1, m.group(3), target if marker == "file" else ""))
    return out


SNIPPET_CLUSTER = cluster_doc("snippets", kubernetes="1.36", driver="0.5.1", pools=[
    {"name": "h200", "nodes": 2, "gpu": {"model": "H200-141GB", "count": 8}},
    {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}])
SNIPPET_PAGES = [page for page in PAGES if _yaml_snippets(page)]


def test_the_docs_show_yaml_to_copy():
    """The snippet test below must have something to prove: the README and the how-to pages hold intents."""
    shown = {page.relative_to(REPO).as_posix(): len(_yaml_snippets(page)) for page in SNIPPET_PAGES}
    assert shown.get("README.md", 0) >= 3 and shown.get("docs/tutorial.md", 0) >= 2, shown
    assert sum(n for name, n in shown.items() if name.startswith("docs/how-to/")) >= 15, shown


@pytest.mark.parametrize("page", SNIPPET_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_yaml_snippet_of_a_page_validates(page, tmp_path):
    """Each page is one fleet: whole documents go into it as they are; `spec:` fragments become a cluster of their
    own, `gpu:` fragments the gpu block of a workload on a cluster recent enough for them. A workload names clusters
    of its own page. The fleet must validate with no error."""
    name = page.relative_to(REPO).as_posix()
    clusters, workloads = [SNIPPET_CLUSTER], {}
    for line, text, target in _yaml_snippets(page):  # a file a page writes again replaces its earlier version
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        if target.startswith("workloads/"):
            workloads.pop(target.removeprefix("workloads/"), None)
        assert docs, f"{name}:{line}: an empty yaml snippet"
        for doc in docs:
            if doc.get("apiVersion") == "gpuc.dev/v1alpha1":
                if doc["kind"] == "Cluster":
                    clusters.append(doc)
                else:
                    file = target.removeprefix("workloads/") if target else f"snippet-{line}.yaml"
                    workloads.setdefault(file, []).append(doc)
            elif set(doc) == {"spec"}:  # a fragment of a Cluster's spec: a cluster of its own with it
                clusters.append(deep_update(copy.deepcopy(SNIPPET_CLUSTER), {"metadata": {"name": f"snippets-{line}"}, **doc}))
            else:
                assert set(doc) == {"gpu"}, f"{name}:{line}: a snippet gpuc cannot place (fence output as text): {text}"
                workloads[f"snippet-{line}.yaml"] = [workload_doc(f"snippet-{line}", clusters=["snippets"], **doc)]
    root = write_fleet(tmp_path / "fleet", clusters, workloads)
    result = gpuc("validate", root)
    assert result.code == 0, f"{name}: {result.err}"
    assert ": error:" not in result.err


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The page without its code blocks and code spans, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.replace("`", "").strip().lower()).replace(" ", "-") for h in headings}


def _links(page: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(page.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_every_relative_link_of_the_docs_opens():
    """Every relative link of the README and docs/ names a file of the checkout, and its #anchor a heading there."""
    broken = []
    for page in PAGES:
        for target in _links(page):
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and (resolved.suffix != ".md" or anchor not in _anchors(resolved)):
                broken.append(f"{page.relative_to(REPO)}: {target} (no heading with that anchor)")
            elif REPO not in resolved.parents and resolved != REPO:
                broken.append(f"{page.relative_to(REPO)}: {target} (outside the checkout)")
    assert broken == []
    assert _anchors(REPO / "docs" / "reference" / "output-checks.md") >= {"acknowledging-a-warning"}


def test_every_docs_page_is_reachable_from_the_readme():
    """Nothing moved out of the README is lost: every page of docs/ is a chain of links away from it."""
    seen, todo = set(), [REPO / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        todo += [(page.parent / t.partition("#")[0]).resolve() for t in _links(page) if t.partition("#")[0]]
    assert [p.relative_to(REPO).as_posix() for p in PAGES if p not in seen] == []


# ------------------------------------------------------------------------------------- paths, crashes

def test_paths_are_relative_to_the_working_directory(tmp_path, monkeypatch):
    root = write_fleet(tmp_path / "fleet", [cluster_doc()], {"w.yaml": [workload_doc(gpu={"sharng": "MPS"})]})
    monkeypatch.chdir(tmp_path)
    assert gpuc("validate", "fleet").err.startswith("fleet/workloads/w.yaml:8: error: spec.gpu.sharng")
    monkeypatch.chdir(root / "workloads")
    assert gpuc("validate", "..").err.startswith("w.yaml:8: error: spec.gpu.sharng")
    data = json.loads(gpuc("validate", "..", "--output", "json").out)
    assert data["diagnostics"][0]["file"] == "w.yaml"
    # one level up reads fine relative; two or more levels up, the absolute path reads better
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    assert gpuc("validate", root).err.startswith("../fleet/workloads/w.yaml:8: error: spec.gpu.sharng")
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert gpuc("validate", "../../fleet").err.startswith(f"{root}/workloads/w.yaml:8: error: spec.gpu.sharng")


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

    monkeypatch.setattr(compiler.pipeline, "materialize", broken)
    root = fleet()
    result = gpuc("diff", root, "--base", "HEAD", "--fail-on", "any")
    assert result.code == 2
    assert result.err.startswith("gpuc: internal error in `gpuc diff`: RuntimeError: git exploded")
    assert "Traceback" not in result.err and "GPUC_DEBUG=1" in result.err
    monkeypatch.setenv("GPUC_DEBUG", "1")
    with pytest.raises(RuntimeError):
        gpuc("diff", root, "--base", "HEAD")


def test_ci_formats_put_findings_on_their_lines(tmp_path, monkeypatch):
    write_fleet(tmp_path / "fleet", [cluster_doc()], {"w.yaml": [workload_doc(gpu={"sharng": "MPS, 100%"})]})
    monkeypatch.chdir(tmp_path)
    github = gpuc("validate", "fleet", "--output", "github")
    assert github.code == 2
    assert github.out == ("::error file=fleet/workloads/w.yaml,line=8,title=gpuc spec.gpu.sharng::spec.gpu.sharng: unknown field "
                          "'sharng'%0Ahint: did you mean 'sharing'?\n")
    report = json.loads(gpuc("validate", "fleet", "--output", "sarif").out)
    assert report["version"] == "2.1.0"
    (result,) = report["runs"][0]["results"]
    assert result["level"] == "error" and result["ruleId"] == "gpuc/schema"
    assert result["locations"][0]["physicalLocation"] == {"artifactLocation": {"uri": "fleet/workloads/w.yaml"}, "region": {"startLine": 8}}
    doc = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"})
    write_fleet(tmp_path / "fork", [doc], {})
    warned = gpuc("render", "fork", "-o", tmp_path / "out", "--output", "github")
    assert warned.code == 0 and warned.out.startswith("::warning file=fork/clusters/c1.yaml,line=") and "title=gpuc driver-fork::" in warned.out


# ------------------------------------------------------------------------------------- acknowledgements, schemas

def test_an_acknowledged_warning_is_not_printed(fleet):
    doc = cluster_doc(driver="25.8.1", kubernetes="1.33", draDriver={"fabric": "topologyConfig"})
    noisy = gpuc("validate", fleet(clusters=[doc]), "--output", "json")
    (warning,) = [w for w in json.loads(noisy.out)["warnings"] if w.get("code") == "driver-fork"]
    assert "spec.acknowledge: [{warning: driver-fork, reason: ...}]" in warning["hint"]
    doc["spec"]["acknowledge"] += [{"warning": "driver-fork", "reason": "we run the fork in staging"}]
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


def test_catalog_lists_what_intents_may_name():
    from compiler.facts import catalog

    data = json.loads(gpuc("catalog", "--output", "json").out)
    assert [m["model"] for m in data["gpuModels"]] == list(catalog.gpu_models())
    h100 = next(m for m in data["gpuModels"] if m["model"] == "H100-80GB")
    assert "3g.40gb" in h100["migProfiles"] and h100["nvlink"] == "nvswitch"
    assert [k["version"] for k in data["kubernetesVersions"]][-2:] == ["1.36", "1.37"]
    assert "DRAConsumableCapacity" in data["kubernetesVersions"][-1]["draGatesOnByDefault"]
    assert data["draDriverLines"][-1]["line"] == "0.5"
    text = gpuc("catalog").out
    assert "GB200-186GB  NVIDIA GB200, Blackwell, 185 GiB, multi-node NVLink" in text


def test_explain_lists_workloads_and_suggests_a_name():
    listing = gpuc("explain", EXAMPLES)
    assert listing.code == 0 and "  nim-service/llama-70b\n" in listing.out
    wrong = gpuc("explain", EXAMPLES, "llama-70")
    assert wrong.code == 2 and "did you mean 'llama-70b'?" in wrong.err


def test_init_scaffolds_a_fleet_that_validates_quietly(tmp_path):
    created = gpuc("init", tmp_path / "fleet", "--cluster", "prod-east")
    assert created.code == 0, created.err
    result = gpuc("validate", tmp_path / "fleet")
    assert result.code == 0 and result.err == "", result.err
    assert gpuc("render", tmp_path / "fleet", "-o", tmp_path / "out").code == 0
    again = gpuc("init", tmp_path / "fleet")
    assert again.code == 2 and "exists and is not empty" in again.err
    assert gpuc("init", tmp_path / "other", "--cluster", "Prod_East").code == 2 and not (tmp_path / "other").exists()
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "fleet", check=True)
    ignored = subprocess.run(["git", "check-ignore", "-q", "rendered/prod-east/kustomization.yaml"], cwd=tmp_path / "fleet", check=False)
    assert ignored.returncode == 1, "rendered/ is committed: Argo CD syncs it from the fleet's repository"


def test_the_tutorial_shows_what_init_writes(tmp_path, monkeypatch):
    """The tutorial's first workload is the file `gpuc init` writes, comment for comment."""
    monkeypatch.chdir(tmp_path)
    assert gpuc("init", "my-fleet", "--cluster", "prod-east").code == 0
    written = (tmp_path / "my-fleet" / "workloads" / "example.yaml").read_text()
    assert written in (REPO / "docs" / "tutorial.md").read_text()


def test_init_says_what_gpu_cluster_mode_needs(tmp_path):
    """The scaffold's comment says what gpuCluster mode needs. Switched to it, the fleet validates quietly either way:
    with the driver root /run/nvidia/driver the GPU Operator installs the driver (its NVIDIADriver CR), with `/` the
    host's driver is used and the chart's driver is off (issue 26: the chart's own validations)."""
    assert gpuc("init", tmp_path / "fleet", "--cluster", "lab").code == 0
    path = tmp_path / "fleet" / "clusters" / "lab.yaml"
    text = path.read_text()
    assert '"/" when the' in text and "gpuCluster (v26.7+: set nvidiaDriverRoot too)" in text
    text = text.replace("mode: helm ", "mode: gpuCluster ").replace("version: v25.10.1", "version: v26.7.0")
    for root in ("/run/nvidia/driver", "/"):
        path.write_text(text.replace("nvidiaDriverRoot: /run/nvidia/driver", f"nvidiaDriverRoot: {root}"))
        quiet = gpuc("render", tmp_path / "fleet", "-o", tmp_path / f"out{len(root)}")
        assert quiet.code == 0 and quiet.err == "", quiet.err
        values = yaml.safe_load((tmp_path / f"out{len(root)}" / "lab" / "values" / "gpu-operator.yaml").read_text())
        assert values["driver"] == ({"nvidiaDriverCRD": {"enabled": True}} if root != "/" else {"enabled": False})


def test_the_schema_describes_every_field_and_completes_models_and_profiles():
    from compiler.emit.schema import DESCRIPTIONS
    from compiler.facts import catalog

    schema = json.loads(gpuc("schema").out)
    definitions = schema["$defs"]
    undescribed = [f"{name}.{field}" for name, d in definitions.items() for field, p in (d.get("properties") or {}).items()
                   if "description" not in p]
    assert undescribed == []
    stale = [f"{name}.{field}" for name, fields in DESCRIPTIONS.items() for field in fields
             if field not in (definitions.get(name, {}).get("properties") or {})]
    assert stale == []
    assert definitions["PoolGpu"]["properties"]["model"]["enum"] == sorted(catalog.gpu_models())
    assert "1g.10gb" in definitions["MigSlice"]["properties"]["profile"]["enum"]


def test_replicas_that_do_not_fit_are_one_finding_at_replicas(fleet, monkeypatch):
    root = fleet(workloads={"w.yaml": [workload_doc("train", replicas=6, gpu={"count": 4})]})  # 2 nodes x 8 H100
    monkeypatch.chdir(root)
    result = gpuc("validate", ".")
    assert result.code == 1
    errors = [line for line in result.err.splitlines() if ": error: spec." in line]
    assert errors == ["workloads/w.yaml:7: error: spec.replicas: 2 of 6 pods of team/train cannot be placed on cluster 'c1' "
                      "(train-4, train-5): request 'gpu' of train needs 4 free devices on one node: 16 match, 16 are allocated (16 by earlier pods of team/train), "
                      "at most 0 free on one node"]
    assert "hint: lower replicas to 4 or fewer" in result.err


def test_cluster_shows_only_that_clusters_warnings(tmp_path):
    import shutil

    fleet = shutil.copytree(EXAMPLES, tmp_path / "fleet")
    for path in (fleet / "clusters").glob("*.yaml"):
        path.write_text(path.read_text().split("  acknowledge:")[0])
    west = gpuc("validate", fleet, "--cluster", "west")
    assert west.code == 0
    assert "staging.yaml" not in west.err and "prod-east.yaml" not in west.err and "west.yaml:8: warning" in west.err
    assert west.out.startswith("ok: 1 workload(s) on 1 cluster(s)")
