"""`gpuc diff` on a temporary git repository: one realistic intent change per test."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import NIM_SECRETS, REPO, cluster_doc, gpuc, nim_model, workload_doc, write_fleet

# several replicas mount one model cache: ReadWriteMany (gpuc refuses ReadWriteOnce for more than one pod)
RWX = {"accessMode": "ReadWriteMany"}

A100_MIG = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    """A git repository whose fleet/ holds one cluster and two workloads, committed as `base`."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    workloads = {
        "chat.yaml": [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=2, gpu={"count": 1})],
        "notebooks.yaml": [workload_doc("notebooks", "research", clusters=["c1"], gpu={"mig": {"slices": [{"profile": "3g.40gb"}]}})],
    }
    write_fleet(root / "fleet", [cluster_doc("c1", pools=[H100, A100_MIG]), cluster_doc("c2", pools=[H100])], workloads)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "tag", "base")
    return root


def edit(repo: Path, rel: str, docs: list[dict]) -> None:
    (repo / "fleet" / rel).write_text(yaml.safe_dump_all(docs, sort_keys=False))


def rebase(repo: Path, message: str) -> None:
    """Commit the working tree as the new `base`: a scenario's starting point."""
    git(repo, "commit", "-qam", message)
    git(repo, "tag", "-f", "base")


def relayout(repo: Path, layout: str) -> None:
    """Give c1's A100 pool another MIG layout."""
    edit(repo, "clusters/c1.yaml", [cluster_doc("c1", pools=[H100, dict(A100_MIG, mig={"layout": layout})])])


def diff(repo: Path, *extra: str):
    return gpuc("diff", repo / "fleet", "--base", "base", *extra)


def test_no_change(repo):
    result = diff(repo, "--fail-on", "any")
    assert result.code == 0, result.err
    assert "No change to any cluster's compiled objects or intents." in result.out


def test_gpu_count_change(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=2, gpu={"count": 2})])
    result = diff(repo)
    assert result.code == 0, result.err
    out = result.out
    # the NIMCache caches another tensor-parallel profile: a new cache too
    assert "| c1 | changed | - | 1 changed | 3 replaced | - | GPUs 2 -> 4 (+2) | fits -> fits | 3 |" in out
    assert "- changed `nim/chat`\n  - `spec.gpu.count`: `1` -> `2`" in out
    assert "`spec.spec.devices.requests[gpu].exactly.count`: `1` -> `2`" in out
    assert "`spec.source.ngc.model.tensorParallelism`: `1` -> `2`" in out
    assert "`NIMService nim/chat`: spec.draResources is immutable: the NIMService is deleted and recreated" in out
    assert "ResourceClaimTemplate nim/chat-gpu-" in out and "claim specs are immutable" in out
    assert diff(repo, "--fail-on", "gpu-increase").code == 1
    assert diff(repo, "--fail-on", "replacement").code == 1
    assert diff(repo, "--fail-on", "infeasible").code == 0
    assert diff(repo, "--fail-on", "gpu-increase", "--fail-on", "infeasible").code == 1, "a repeated --fail-on adds a gate"
    assert diff(repo, "--fail-on", "infeasible,cluster-removed", "--fail-on", "replacement").code == 1


def test_a_nim_image_bump_makes_a_new_nimcache(repo):
    """The NIM Operator's CRD makes spec.source.ngc.modelPuller (the NIM image) immutable: the real API server
    refused the in-place update the diff used to promise (issue 27). The cache is named after what it caches, so a
    new image is a new NIMCache the NIMService moves to; the diff says so, and render needs no --allow-replace."""
    assert gpuc("render", repo / "fleet", "-o", repo / "out").code == 0
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B", image="nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4"),
                                                    secrets=NIM_SECRETS, cache=RWX, replicas=2, gpu={"count": 1})])
    result = diff(repo)
    assert result.code == 0, result.err
    replaced = re.search(r"- replaced `NIMCache nim/(chat-[0-9a-f]{8}) -> (chat-[0-9a-f]{8})`\n"
                         r"  - `spec.source.ngc.modelPuller`: `nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3` -> "
                         r"`nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4`\n", result.out)
    assert replaced is not None, result.out
    old, new = replaced.groups()
    assert f"`spec.storage.nimCache.name`: `{old}` -> `{new}`" in result.out  # the NIMService moves to the new cache
    assert f"`NIMCache nim/{old} -> {new}`: a NIMCache caches one model image (its model puller is immutable)" in result.out
    assert diff(repo, "--fail-on", "replacement").code == 1
    rendered = gpuc("render", repo / "fleet", "-o", repo / "out")  # over the previous tree: an update, no replacement to accept
    assert rendered.code == 0 and "--allow-replace" not in rendered.err, rendered.err
    assert sorted(p.name for p in (repo / "out" / "c1").glob("*nimcache*")) == [f"4-nimcache-nim-{new}.yaml"]


def test_sharing_strategy_change(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=1,
                                                    gpu={"count": 1, "sharing": "MPS", "shareGroup": "chat-pool"})])
    result = diff(repo)
    assert result.code == 0, result.err
    out = result.out
    assert "- added `ResourceClaim nim/chat-pool-" in out
    assert "- removed `ResourceClaimTemplate nim/chat-gpu-" in out
    assert "`spec.gpu.sharing`: `Exclusive` -> `MPS`" in out
    assert "`spec.draResources[0].resourceClaimTemplateName`: removed" in out
    assert "`NIMService nim/chat`: spec.draResources is immutable" in out
    assert diff(repo, "--fail-on", "replacement").code == 1


def test_new_workload(repo):
    edit(repo, "workloads/batch.yaml", [workload_doc("batch", "research", clusters=["c2"], gpu={"count": 4})])
    result = diff(repo)
    assert result.code == 0, result.err
    out = result.out
    assert "| c2 | changed | - | 1 added | 2 added | - | GPUs 2 -> 6 (+4) | fits -> fits | - |" in out
    assert "- added `batch`" not in out and "- added `research/batch`" in out
    assert "- added `ResourceClaimTemplate research/batch-gpu-" in out
    assert "Replacements" not in out
    assert diff(repo, "--fail-on", "replacement").code == 0
    assert diff(repo, "--fail-on", "gpu-increase").code == 1


def test_removed_cluster(repo):
    (repo / "fleet" / "clusters" / "c2.yaml").unlink()
    result = diff(repo, "--fail-on", "cluster-removed")
    assert result.code == 1
    assert "| c2 | removed |" in result.out and "fits -> -" in result.out
    assert "- removed `Namespace nim`" in result.out


def test_mig_mix_change(repo):
    edit(repo, "workloads/notebooks.yaml", [workload_doc("notebooks", "research", clusters=["c1"], gpu={"mig": {"slices": [
        {"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]}})])
    result = diff(repo)
    assert result.code == 0, result.err
    out = result.out
    assert "MIG 1g.10gb 0 -> 2 (+2)" in out
    assert "replaced `ResourceClaimTemplate research/notebooks-gpu-" in out
    # a whole new request reads as YAML in a diff block, not as cut inline JSON
    assert "- `spec.spec.devices.requests[mig-1g-10gb]` added:\n\n    ```diff\n" in out
    assert "    +exactly:\n" in out and "    +  deviceClassName: mig.nvidia.com\n" in out
    assert "`spec.spec.devices.constraints` added:" in out
    assert diff(repo, "--fail-on", "replacement").code == 1


def test_change_that_makes_the_plan_infeasible(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=2,
                                                    gpu={"count": 1, "require": {"minMemory": "100Gi"}})])
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1
    assert "| c1 | changed | - | 1 changed | - | - | GPUs 2 -> ?<br>MIG 3g.40gb 1 -> ? | fits -> **does not fit** (1 workload finding(s) below) | - |" in result.out
    assert "### Does not fit" in result.out
    assert "no node pool of cluster 'c1' can serve this workload" in result.out
    assert diff(repo).code == 0, "without --fail-on the report is informational"


def test_json_output(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=3, gpu={"count": 1})])
    result = diff(repo, "--output", "json", "--fail-on", "gpu-increase")
    assert result.code == 1
    data = json.loads(result.out)
    assert data["gated"] == ["gpu-increase"] and "any" in data["conditions"]
    c1 = next(c for c in data["clusters"] if c["cluster"] == "c1")
    assert c1["devices"]["GPUs"] == {"before": 2, "after": 3}
    service = next(o for o in c1["objects"] if o["kind"] == "NIMService")
    assert service["fields"] == [{"path": "spec.replicas", "old": 2, "new": 3}]
    assert c1["replacements"] == []


def test_fleet_absent_at_base_is_an_empty_base(repo):
    git(repo, "mv", "fleet", "fleet2")
    git(repo, "commit", "-qm", "rename")
    result = gpuc("diff", repo / "fleet2", "--base", "base")
    assert result.code == 0
    assert "| c1 | added |" in result.out and "| c2 | added |" in result.out


def test_working_tree_is_not_touched(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=5, gpu={"count": 1})])
    before = git(repo, "status", "--porcelain")
    diff(repo)
    assert git(repo, "status", "--porcelain") == before
    assert "replicas: 5" in (repo / "fleet" / "workloads" / "chat.yaml").read_text()


def test_bad_reference_and_not_a_repository(repo, tmp_path, monkeypatch):
    result = gpuc("diff", repo / "fleet", "--base", "no-such-branch")
    assert result.code == 2 and "'no-such-branch' is not a commit of this repository" in result.err
    assert result.err.rstrip().endswith("1 error(s); no diff was produced") and "nothing was written" not in result.err
    plain = write_fleet(tmp_path / "plain")
    # git looks no higher than the test's directory: a TMPDIR inside a checkout (the clone's own .tmp) would
    # otherwise make that checkout the fleet's repository
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    result = gpuc("diff", plain, "--base", "main")
    assert result.code == 2 and "not inside a git repository" in result.err


def test_unknown_gate_is_a_usage_error(repo):
    result = diff(repo, "--fail-on", "replacements")
    assert result.code == 2 and "unknown condition replacements" in result.err


def test_a_broken_base_is_reported_and_the_head_still_diffed(repo):
    """A pull request that fixes a broken main must be reviewable: the base's errors are reported, not fatal."""
    (repo / "fleet" / "workloads" / "chat.yaml").write_text("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: x}\nspec: {replicas: -1}\n")
    git(repo, "commit", "-qam", "broken")
    git(repo, "tag", "broken")
    (repo / "fleet" / "workloads" / "chat.yaml").write_text(yaml.safe_dump(workload_doc("chat", "nim")))
    result = gpuc("diff", repo / "fleet", "--base", "broken", "--fail-on", "any")
    assert result.code == 1, result.err
    assert "### The base does not compile" in result.out
    assert "`broken:workloads/chat.yaml:4` spec.replicas: (at the base)" in result.out
    assert "| c1 | changed | a100 ? -> 8<br>h100 ? -> 16 | - | - | - | GPUs ? -> 1<br>MIG 3g.40gb ? -> 1 | **does not compile** -> fits | - |" in result.out
    data = json.loads(gpuc("diff", repo / "fleet", "--base", "broken", "--output", "json").out)
    assert data["baseProblems"][0]["file"] == "broken:workloads/chat.yaml"


def test_bad_input_on_the_head_side_is_still_an_error(repo):
    (repo / "fleet" / "workloads" / "chat.yaml").write_text("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: x}\nspec: {replicas: -1}\n")
    result = diff(repo)
    assert result.code == 2 and "workloads/chat.yaml:4" in result.err and "(at the base)" not in result.err


def test_cluster_intent_change_is_a_change(repo):
    """Fewer nodes changes no compiled object, but it is what the reviewer must see: the pool's GPUs offered."""
    edit(repo, "clusters/c2.yaml", [cluster_doc("c2", pools=[dict(H100, nodes=1)], draDriver={"values": {"logVerbosity": "4"}})])
    result = diff(repo, "--fail-on", "any")
    assert result.code == 1, result.err
    out = result.out
    assert "| c2 | changed | h100 16 -> 8 (-8)<br>2 field(s) changed | - | " in out
    assert "| nvidia-dra-driver-gpu: values |" in out  # a Helm values change is visible in the summary
    assert "#### Cluster intent\n" in out and "- `spec.nodePools[h100].nodes`: `2` -> `1`\n" in out
    data = json.loads(diff(repo, "--output", "json").out)
    c2 = next(c for c in data["clusters"] if c["cluster"] == "c2")
    assert c2["capacity"] == {"h100": {"before": 16, "after": 8}} and c2["status"] == "changed"


def test_cluster_filter_on_a_cluster_the_change_removes(repo):
    (repo / "fleet" / "clusters" / "c2.yaml").unlink()
    result = diff(repo, "--cluster", "c2", "--fail-on", "cluster-removed")
    assert result.code == 1, result.err
    assert "| c2 | removed |" in result.out and "| c1 |" not in result.out
    result = diff(repo, "--cluster", "c3")
    assert result.code == 2 and "no cluster named 'c3' in the fleet, now or at base" in result.err


def test_a_claims_only_claim_replacement_says_pods_must_be_updated(repo):
    shared = {"sharing": "TimeSlicing", "shareGroup": "lab", "mig": {"slices": [{"profile": "3g.40gb"}]}}
    edit(repo, "workloads/notebooks.yaml", [workload_doc("notebooks", "research", clusters=["c1"], gpu=shared)])
    rebase(repo, "shared notebooks")
    edit(repo, "workloads/notebooks.yaml", [workload_doc("notebooks", "research", clusters=["c1"],
                                                         gpu=dict(shared, mig={"slices": [{"profile": "2g.20gb"}]}))])
    out = diff(repo).out
    assert "replaced `ResourceClaim research/lab-" in out
    assert "pods of research/notebooks that reference `lab-" in out and "must be updated to `lab-" in out


def test_gpu_increase_counts_physical_gpus(repo):
    """Three 1g.10gb slices take two A100s (all-balanced has two per GPU); one 2g.20gb takes one: a larger
    profile on fewer GPUs is no increase."""
    def notebooks(slices):
        edit(repo, "workloads/notebooks.yaml", [workload_doc("notebooks", "research", clusters=["c1"],
                                                             gpu={"mig": {"sameGpu": False, "slices": slices}})])
    notebooks([{"profile": "1g.10gb", "count": 3}])
    rebase(repo, "three small slices")
    notebooks([{"profile": "2g.20gb"}])
    result = diff(repo, "--fail-on", "gpu-increase", "--output", "json")
    c1 = next(c for c in json.loads(result.out)["clusters"] if c["cluster"] == "c1")
    assert c1["devices"]["MIG 2g.20gb"] == {"before": 0, "after": 1}
    assert c1["gpusOccupied"] == {"before": 4, "after": 3}
    assert result.code == 0
    notebooks([{"profile": "1g.10gb", "count": 5}])
    assert diff(repo, "--fail-on", "gpu-increase").code == 1


def test_example_ci_files_parse_and_match_the_rendered_layout():
    examples = REPO / "examples" / "ci"
    diff_flow = yaml.safe_load((examples / "github" / "gpuc-diff.yaml").read_text())
    steps = " ".join(str(s.get("run", "")) for s in diff_flow["jobs"]["diff"]["steps"])
    assert "gpuc diff . --base" in steps and "--fail-on infeasible,budget" in steps  # the fleet at the root, as gpuc init lays it out
    assert "```text" in steps and "gpuc-diff.err" in steps, "on exit 2 the diagnostics are posted, not an empty body"
    assert "--edit-last" not in steps and "$MARKER" in steps, "the sticky comment is found by its marker"
    assert ".github/workflows/gpuc-*.yaml" in diff_flow[True]["pull_request"]["paths"]  # `on:` parses as True
    assert diff_flow["env"]["GPUC"] == "${{ vars.GPUC }}" and 'pip install "$GPUC"' in steps, "a pinned gpuc, no placeholder URL"
    assert "pull_request_target" in (examples / "github" / "gpuc-diff.yaml").read_text()
    render_flow = yaml.safe_load((examples / "github" / "gpuc-render.yaml").read_text())
    render_steps = " ".join(str(s.get("run", "")) for s in render_flow["jobs"]["render"]["steps"])
    assert "gpuc render . -o rendered" in render_steps
    assert "git pull --rebase origin main" in render_steps and "for attempt in" in render_steps
    assert ".github/workflows/gpuc-*.yaml" in render_flow[True]["push"]["paths"]
    from compiler.emit.scaffold import workflows

    shipped = {f".github/workflows/{p.name}": p.read_text() for p in (examples / "github").glob("*.yaml")}
    assert shipped == workflows(), "examples/ci/github holds what gpuc init --ci github writes"
    appset = yaml.safe_load((examples / "argocd" / "applicationset.yaml").read_text())
    assert appset["spec"]["generators"][0]["git"]["directories"] == [{"path": "rendered/*"}]
    assert appset["spec"]["template"]["spec"]["source"]["path"] == "{{ .path.path }}/argocd"


def test_a_change_the_allocator_cannot_place(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=20, gpu={"count": 1})])  # replicas on both nodes share the cache
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1
    out = result.out
    assert "| c2 | changed | - | 1 changed | 1 changed | - | GPUs 2 -> 20 (+18) | fits -> **does not fit**: add " in out
    assert "- **c2**: 4 pod(s) of `nim/chat` cannot be placed: request 'gpu' of chat needs 1 free device" in out  # folded
    assert "### Capacity after the change" in out
    assert "| h100 | 2 | 16 | 2 -> 16 |" in out  # c2's only pool fills up
    assert "Cannot be placed" not in out, "the capacity section does not repeat the pods listed under Does not fit"


def test_capacity_section_shows_pool_use_before_and_after(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=4, gpu={"count": 1})])
    out = diff(repo).out
    assert "**c1**: 5 of 5 pods placed" in out
    assert "| h100 | 2 | 16 | 2 -> 4 | `##........` 25% |" in out
    data = json.loads(diff(repo, "--output", "json").out)
    c1 = next(c for c in data["clusters"] if c["cluster"] == "c1")
    assert {"pool": "h100", "gpus": 16, "gpusUsedBefore": 2, "gpusUsedAfter": 4} in c1["pools"]


def test_a_layout_change_that_strands_a_mig_workload_is_infeasible(repo):
    notebooks = [workload_doc("notebooks", "research", clusters=["c1"], gpu={"mig": {"slices": [{"profile": "1g.10gb"}]}})]
    edit(repo, "workloads/notebooks.yaml", notebooks)
    rebase(repo, "notebooks on 1g.10gb")
    relayout(repo, "all-3g.40gb")
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1, result.err
    assert "fits -> **does not fit**" in result.out
    assert "a100: no MIG 1g.10gb in layout all-3g.40gb" in result.out


def test_a_mig_reconfiguration_is_a_disruption(repo):
    relayout(repo, "all-3g.40gb")  # notebooks' 3g.40gb still fits
    result = diff(repo, "--fail-on", "replacement")
    assert result.code == 1, result.err
    assert "### Replacements and disruptions" in result.out
    assert "- **c1** `node pool a100: nvidia.com/mig.config all-balanced -> all-3g.40gb`: MIG reconfiguration" in result.out
    # a DRA pool: the running kubelet plugin publishes the new MIG devices only after a restart (issue 26)
    assert ("the running DRA kubelet plugin does not see the new MIG devices until it restarts: once "
            "nvidia.com/mig.config.state=success on the pool's nodes, "
            "`kubectl -n nvidia-dra-driver-gpu rollout restart daemonset/nvidia-dra-driver-gpu-kubelet-plugin`") in result.out


def test_a_big_change_fits_a_pull_request_comment(repo):
    """400 replicas that cannot be placed and 300 new workloads: one line per pod or object would be far over
    GitHub's 65,536-character comment limit."""
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, cache=RWX, replicas=400, gpu={"count": 1})])
    edit(repo, "workloads/many.yaml", [workload_doc(f"batch-{i:03}", "research", clusters=["c1"], gpu={"count": 1}) for i in range(300)])
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1, result.err
    out = result.out
    assert len(out) < 60_000
    assert out.count("cannot be placed: request 'gpu' of chat") == 2  # one line per cluster, not one per pod
    assert "- **c2**: 384 pod(s) of `nim/chat` cannot be placed" in out
    assert "| c1 | changed |" in out and "| c2 | changed |" in out  # the summary is kept whole
    assert "- ... and 281 more (run `gpuc diff --output json` for all)" in out  # c1's unplaceable batch workloads
    assert "- ... and 252 more (run `gpuc diff --output json` for all)" in out  # c1's added and changed objects, in its details
    assert "Cannot be placed" not in out
    assert out.count("<details>") == out.count("</details>")


def test_markdown_is_cut_to_fit_keeping_the_summary():
    from compiler.emit.diff.compare import ClusterDiff, FleetDiff, ObjectChange
    from compiler.emit.diff.fields import FieldChange
    from compiler.emit.diff.report import markdown

    fields = tuple(FieldChange(f"spec.values[{i}]", "x" * 100, "y" * 100) for i in range(40))
    clusters = [ClusterDiff(f"c{n:03}", "changed", feasible=(True, True),
                            objects=[ObjectChange("ConfigMap", "ns", f"cm{i}", "changed", fields=fields) for i in range(50)])
                for n in range(150)]
    out = markdown(FleetDiff("main", clusters))
    assert len(out) < 60_000
    assert all(f"| c{n:03} | changed |" in out for n in range(150))
    assert out.count("<details>") == out.count("</details>")
    assert out.rstrip().endswith("cut to fit a pull-request comment (run `gpuc diff --output json` for all)*")


def test_an_explicit_layout_equal_to_a_named_one_is_no_reconfiguration(repo):
    """all-balanced on an A100-80GB is 2x 1g.10gb + 1x 2g.20gb + 1x 3g.40gb: writing it out changes nothing compiled."""
    explicit = [{"profile": "1g.10gb", "count": 2}, {"profile": "2g.20gb"}, {"profile": "3g.40gb"}]
    edit(repo, "clusters/c1.yaml", [cluster_doc("c1", pools=[H100, dict(A100_MIG, mig={"layout": explicit})])])
    result = diff(repo, "--fail-on", "replacement")
    assert result.code == 0, result.out
    assert "MIG reconfiguration" not in result.out and "Replacements and disruptions" not in result.out


def test_the_report_names_the_base_commit_and_the_tripped_gate(repo):
    commit = git(repo, "rev-parse", "--short", "base").strip()
    relayout(repo, "all-3g.40gb")
    result = diff(repo, "--fail-on", "replacement,any")
    assert result.code == 1
    assert result.out.startswith(f"## gpuc diff against `base` ({commit})\n\n> **`--fail-on` tripped**: `any`: c1 changed; "
                                 "`replacement`: 1 object(s) replaced, not updated in place (c1)\n")
    assert "gpuc diff: --fail-on replacement tripped: 1 object(s) replaced, not updated in place (c1)" in result.err
    assert json.loads(diff(repo, "--output", "json").out)["baseCommit"] == commit


def test_a_multi_line_value_is_shown_as_a_unified_diff(repo):
    """The mig-parted config is one YAML string: its change reads line by line, not as cut JSON."""
    relayout(repo, "all-3g.40gb")
    out = diff(repo).out
    assert "- `data.config.yaml` changed:\n\n    ```diff\n    @@" in out
    assert "\n    +  all-3g.40gb:\n" in out and "\n    -  all-balanced:\n" in out


def _trainer(replicas: int) -> list[dict]:
    return [workload_doc("train", "research", clusters=["c1"], replicas=replicas, gpu={"count": 8})]


def test_the_cost_of_a_change_per_pool_with_the_nodes_to_add(repo):
    """Issue 37: the GPUs a change takes per pool, whether it fits, what is left and what to add, at the top."""
    edit(repo, "workloads/train.yaml", _trainer(1))
    git(repo, "add", "-A")
    rebase(repo, "one trainer")
    edit(repo, "workloads/train.yaml", _trainer(4))  # 2 H100 nodes of 8 GPUs, the chat pods on one of them: 3 do not fit
    result = diff(repo)
    head = result.out.split("### Cost of this change", 1)
    assert len(head) == 2 and "| cluster | status |" not in head[0], "the cost table comes first"
    assert "| c1 | h100 | 10 -> 16 (+6) | 10 -> 16 (+6) devices | 0 |" in result.out, result.out
    assert "- **c1**: **does not fit**: add 3 nodes to pool h100 (24 GPUs)" in result.out, "one verdict per cluster"
    data = json.loads(diff(repo, "--output", "json").out)
    cost = next(c for c in data["clusters"] if c["cluster"] == "c1")["cost"]
    assert cost["fits"] is False and cost["add"] == [{"pool": "h100", "nodes": 3, "gpus": 24}]
    h100 = next(p for p in cost["pools"] if p["pool"] == "h100")
    assert h100["gpus"] == {"before": 10, "after": 16} and h100["freeGpusAfter"] == 0


def test_the_cost_names_the_budgets_a_change_takes_a_team_over_in_every_output(repo):
    budget = {"namespace": "research", "devices": {"gpu.nvidia.com": 8}}
    edit(repo, "clusters/c1.yaml", [cluster_doc("c1", pools=[H100, A100_MIG], budgets=[budget])])
    edit(repo, "workloads/train.yaml", _trainer(1))
    git(repo, "add", "-A")
    rebase(repo, "a budget and one trainer")
    edit(repo, "workloads/train.yaml", [workload_doc("train", "research", clusters=["c1"], replicas=1, gpu={"count": 8}),
                                        workload_doc("extra", "research", clusters=["c1"], replicas=1, gpu={"count": 2})])
    result = diff(repo)
    assert "- **c1**: **over budget**: `research` gpu.nvidia.com devices 10 of 8\n" in result.out, result.out
    assert "  - budget namespace `research`: gpu.nvidia.com devices 8 -> 10 of 8 (over by 2)" in result.out
    assert "| fits -> **over budget**: `research` gpu.nvidia.com devices 10 of 8 |" in result.out, "not 'fits' beside 'output refused'"
    assert diff(repo).code == 0 and diff(repo, "--fail-on", "budget").code == 1
    assert "--fail-on budget tripped: a team over its budget: research on c1" in diff(repo, "--fail-on", "budget").err
    github = diff(repo, "--output", "github").out
    assert "::warning file=" in github and "clusters/c1.yaml,line=" in github
    assert "budget namespace 'research'%3A gpu.nvidia.com devices 8 -> 10 of 8 (over by 2)" in github or \
        "budget namespace 'research': gpu.nvidia.com devices 8 -> 10 of 8 (over by 2)" in github
    sarif = json.loads(diff(repo, "--output", "sarif").out)
    texts = [r["message"]["text"] for r in sarif["runs"][0]["results"]]
    assert any("gpu.nvidia.com devices 8 -> 10 of 8 (over by 2)" in t for t in texts)
    assert any("would claim 10 devices of DeviceClass gpu.nvidia.com against a budget of 8" in t for t in texts)


def test_a_change_that_fits_is_a_note_in_annotations(repo):
    edit(repo, "workloads/train.yaml", _trainer(1))
    result = diff(repo, "--output", "github")
    assert result.code == 0
    assert "::notice file=" in result.out and "cluster c1: fits; pool h100: GPUs 2 -> 10 (+8)" in result.out, result.out


def test_one_verdict_per_cluster_counts_the_budgets(repo):
    """Issue 46: not "fits: yes" beside "output refused", but one verdict that says a change fits and stays within budgets."""
    budget = {"namespace": "research", "devices": {"gpu.nvidia.com": 12}}
    edit(repo, "clusters/c1.yaml", [cluster_doc("c1", pools=[H100, A100_MIG], budgets=[budget])])
    edit(repo, "workloads/train.yaml", _trainer(1))
    git(repo, "add", "-A")
    rebase(repo, "a budget and one trainer")
    edit(repo, "workloads/train.yaml", [*_trainer(1), workload_doc("extra", "research", clusters=["c1"], gpu={"count": 2})])
    result = diff(repo)
    assert "- **c1**: fits and within budgets\n  - budget namespace `research`: gpu.nvidia.com devices 8 -> 10 of 12 (2 left)\n" in result.out
    assert "| fits -> fits and within budgets |" in result.out
    assert diff(repo, "--fail-on", "budget,infeasible").code == 0


def test_sarif_gives_each_kind_of_finding_its_own_rule(tmp_path, monkeypatch):
    """Code scanning groups and dismisses findings by rule: a schema error, a budget over its limit, a pod that cannot be
    placed and an acknowledgeable warning are four rules, each described."""
    budgets = [{"namespace": "team", "devices": {"gpu.nvidia.com": 1}}, {"namespace": "teem", "claims": 1}]
    root = write_fleet(tmp_path / "fleet", [cluster_doc(budgets=budgets)], {
        "a.yaml": [workload_doc("bad", "other", gpu={"count": 1, "sharng": "MPS"})],
        "b.yaml": [workload_doc("big", "team", replicas=3, gpu={"count": 8})]})
    monkeypatch.chdir(root)
    report = json.loads(gpuc("validate", ".", "--output", "sarif").out)["runs"][0]
    by_rule = {r["ruleId"]: r["message"]["text"].split(":")[0] for r in report["results"]}
    assert by_rule == {"gpuc/schema": "spec.gpu.sharng", "gpuc/output/budgets": "spec.budgets[0].devices.gpu.nvidia.com",
                       "gpuc/placement": "spec.gpu", "unused-budget": "spec.budgets[1].namespace"}, by_rule
    described = {r["id"]: r["shortDescription"]["text"] for r in report["tool"]["driver"]["rules"]}
    assert described["gpuc/placement"] == "pods that cannot be placed on the cluster's devices"
    assert described["gpuc/output/budgets"] == "output check: budgets" and len(set(described.values())) == 4


@pytest.mark.parametrize(("output", "expected"), [
    ("markdown", "| c1 | a100 | 1 | 1 -> 2 (+1) MIG slices | 7 |"),
    ("github", "::notice file="),
    ("github", "cluster c1: fits; pool a100: GPUs 1, MIG slices 1 -> 2 (+1), 7 GPUs free after"),
    ("sarif", '"text": "metadata.name: cluster c1: fits; pool a100: GPUs 1, MIG slices 1 -> 2 (+1), 7 GPUs free after"'),
])
def test_a_change_of_mig_slices_alone_has_a_cost(repo, output, expected):
    """A second 1g.10gb slice lands on the GPU the first one is on (all-balanced has two): no more GPUs are taken, but
    a slice others could use is, and the reviewer must see it in every output."""
    def notebooks(count):
        edit(repo, "workloads/notebooks.yaml", [workload_doc("notebooks", "research", clusters=["c1"],
                                                             gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": count}]}})])
    notebooks(1)
    rebase(repo, "one slice")
    notebooks(2)
    result = diff(repo, "--output", output)
    assert result.code == 0, result.err
    assert expected in result.out, result.out
