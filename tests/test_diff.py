"""`gpuc diff` on a temporary git repository: one realistic intent change per test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import NIM_SECRETS, REPO, cluster_doc, gpuc, nim_model, workload_doc, write_fleet

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
        "chat.yaml": [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=2, gpu={"count": 1})],
        "notebooks.yaml": [workload_doc("notebooks", "research", clusters=["c1"], gpu={"mig": {"slices": [{"profile": "3g.40gb"}]}})],
    }
    write_fleet(root / "fleet", [cluster_doc("c1", pools=[H100, A100_MIG]), cluster_doc("c2", pools=[H100])], workloads)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "tag", "base")
    return root


def edit(repo: Path, rel: str, docs: list[dict]) -> None:
    (repo / "fleet" / rel).write_text(yaml.safe_dump_all(docs, sort_keys=False))


def diff(repo: Path, *extra: str):
    return gpuc("diff", repo / "fleet", "--base", "base", *extra)


def test_no_change(repo):
    result = diff(repo, "--fail-on", "any")
    assert result.code == 0, result.err
    assert "No change to any cluster's compiled objects." in result.out


def test_gpu_count_change(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=2, gpu={"count": 2})])
    result = diff(repo)
    assert result.code == 0, result.err
    out = result.out
    assert "| c1 | changed | 1 changed | 2 changed, 1 replaced | GPUs 2 -> 4 (+2) | fits -> fits | 2 |" in out
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


def test_sharing_strategy_change(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=1,
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
    assert "| c2 | changed | 1 added | 2 added | GPUs 2 -> 6 (+4) | fits -> fits | - |" in out
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
    assert "`spec.spec.devices.requests[mig-1g-10gb]`: added" in out
    assert "`spec.spec.devices.constraints`: added" in out
    assert diff(repo, "--fail-on", "replacement").code == 1


def test_change_that_makes_the_plan_infeasible(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=2,
                                                    gpu={"count": 1, "require": {"minMemory": "100Gi"}})])
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1
    assert "| c1 | changed | 1 changed | - | GPUs 2 -> ?<br>MIG 3g.40gb 1 -> ? | fits -> **does not fit** | - |" in result.out
    assert "### Does not fit" in result.out
    assert "no node pool of cluster 'c1' can serve this workload" in result.out
    assert diff(repo).code == 0, "without --fail-on the report is informational"


def test_json_output(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=3, gpu={"count": 1})])
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
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=5, gpu={"count": 1})])
    before = git(repo, "status", "--porcelain")
    diff(repo)
    assert git(repo, "status", "--porcelain") == before
    assert "replicas: 5" in (repo / "fleet" / "workloads" / "chat.yaml").read_text()


def test_bad_reference_and_not_a_repository(repo, tmp_path):
    result = gpuc("diff", repo / "fleet", "--base", "no-such-branch")
    assert result.code == 2 and "'no-such-branch' is not a commit of this repository" in result.err
    assert result.err.rstrip().endswith("1 error(s); no diff was produced") and "nothing was written" not in result.err
    plain = write_fleet(tmp_path / "plain")
    result = gpuc("diff", plain, "--base", "main")
    assert result.code == 2 and "not inside a git repository" in result.err


def test_unknown_gate_is_a_usage_error(repo):
    result = diff(repo, "--fail-on", "replacements")
    assert result.code == 2 and "unknown condition replacements" in result.err


def test_broken_base_names_the_commit(repo):
    (repo / "fleet" / "workloads" / "chat.yaml").write_text("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: x}\nspec: {replicas: -1}\n")
    git(repo, "commit", "-qam", "broken")
    git(repo, "tag", "broken")
    (repo / "fleet" / "workloads" / "chat.yaml").write_text(yaml.safe_dump(workload_doc("chat", "nim")))
    result = gpuc("diff", repo / "fleet", "--base", "broken")
    assert result.code == 2 and "broken:workloads/chat.yaml:4" in result.err and "(at the base)" in result.err


def test_example_ci_files_parse_and_match_the_rendered_layout():
    examples = REPO / "examples" / "ci"
    diff_flow = yaml.safe_load((examples / "github" / "gpuc-diff.yaml").read_text())
    steps = " ".join(str(s.get("run", "")) for s in diff_flow["jobs"]["diff"]["steps"])
    assert "gpuc diff intents --base" in steps and "--fail-on" in steps
    render_flow = yaml.safe_load((examples / "github" / "gpuc-render.yaml").read_text())
    assert "gpuc render intents -o rendered" in " ".join(str(s.get("run", "")) for s in render_flow["jobs"]["render"]["steps"])
    appset = yaml.safe_load((examples / "argocd" / "applicationset.yaml").read_text())
    assert appset["spec"]["generators"][0]["git"]["directories"] == [{"path": "rendered/*"}]
    assert appset["spec"]["template"]["spec"]["source"]["path"] == "{{ .path.path }}/argocd"


def test_a_change_the_allocator_cannot_place(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=20, gpu={"count": 1})])
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1
    out = result.out
    assert "| c2 | changed | 1 changed | 1 changed | GPUs 2 -> 20 (+18) | fits -> **does not fit** | - |" in out
    assert "cannot be placed on cluster 'c2'" in out  # the allocator's reason, under "Does not fit"
    assert "### Capacity after the change" in out
    assert "| h100 | 2 | 16 | 2 -> 16 |" in out  # c2's only pool fills up
    assert "Cannot be placed (4):" in out


def test_capacity_section_shows_pool_use_before_and_after(repo):
    edit(repo, "workloads/chat.yaml", [workload_doc("chat", "nim", model=nim_model("8B"), secrets=NIM_SECRETS, replicas=4, gpu={"count": 1})])
    out = diff(repo).out
    assert "**c1**: 5 of 5 pods placed" in out
    assert "| h100 | 2 | 16 | 2 -> 4 | `##........` 25% |" in out
    data = json.loads(diff(repo, "--output", "json").out)
    c1 = next(c for c in data["clusters"] if c["cluster"] == "c1")
    assert {"pool": "h100", "gpus": 16, "gpusUsedBefore": 2, "gpusUsedAfter": 4} in c1["pools"]


def test_a_layout_change_that_strands_a_mig_workload_is_infeasible(repo):
    notebooks = [workload_doc("notebooks", "research", clusters=["c1"], gpu={"mig": {"slices": [{"profile": "1g.10gb"}]}})]
    edit(repo, "workloads/notebooks.yaml", notebooks)
    git(repo, "commit", "-qam", "notebooks on 1g.10gb")
    git(repo, "tag", "-f", "base")
    a100 = dict(A100_MIG, mig={"layout": "all-3g.40gb"})
    edit(repo, "clusters/c1.yaml", [cluster_doc("c1", pools=[H100, a100])])
    result = diff(repo, "--fail-on", "infeasible")
    assert result.code == 1, result.err
    assert "fits -> **does not fit**" in result.out
    assert "a100: no MIG 1g.10gb in layout all-3g.40gb" in result.out
