"""One pass (issue 46): `validate`, `render` and `plan` report every finding the fleet has, in file order, not the first
stage's only; nothing a broken document alone causes; and nothing accepted in silence (a budget on a namespace no
workload uses, an entry of the fleet gpuc cannot read)."""

from __future__ import annotations

import os

import pytest

from conftest import cluster_doc, gpuc, nim_model, workload_doc

SECRETS = {"ngcApiKey": "ngc-api-secret", "imagePull": "ngc-secret"}


def _errors(text: str) -> list[str]:
    return [line.split(": error: ")[0] + ": " + line.split(": error: ")[1].split(":")[0] for line in text.splitlines() if ": error: " in line]


def _budgeted(**spec) -> dict:
    return cluster_doc(nimOperator={"version": "3.1.2"}, budgets=[{"namespace": "research", "devices": {"gpu.nvidia.com": 1}}],
                       acknowledge=[{"warning": "unchecked-crds", "reason": "test"}, {"warning": "driver-upgrade", "reason": "test"}],
                       **spec)


def test_a_refused_output_does_not_hide_what_placement_finds(fleet, tmp_path, monkeypatch):
    """The issue's case: a budget error (output checks) hid a NIM's ReadWriteOnce cache across 2 pods (placement)."""
    root = fleet(clusters=[_budgeted()], workloads={
        "nim.yaml": [workload_doc("llama", "inference", replicas=2, model=nim_model(), gpu={"count": "auto"}, secrets=SECRETS)],
        "team.yaml": [workload_doc("example", "research", replicas=3, gpu={"count": 1})]})
    monkeypatch.chdir(root)
    for command in (["validate", "."], ["render", ".", "-o", tmp_path / "out"], ["plan", "."]):
        result = gpuc(*command)
        assert result.code == 1, (command, result.err)
        assert _errors(result.err) == ["clusters/c1.yaml:29: spec.budgets[0].devices.gpu.nvidia.com",
                                       "workloads/nim.yaml:6: spec.cache.accessMode"], (command, result.err)
    assert not (tmp_path / "out").exists()


def test_a_document_error_does_not_hide_the_rest_of_the_fleet(fleet, monkeypatch):
    """A workload that does not validate is reported with what compiling its cluster finds without it, in file order."""
    root = fleet(clusters=[_budgeted()], workloads={
        "a-broken.yaml": [workload_doc("bad", "team-b", gpu={"count": 1, "sharng": "MPS"})],
        "team.yaml": [workload_doc("example", "research", replicas=3, gpu={"count": 1})]})
    monkeypatch.chdir(root)
    result = gpuc("validate", ".")
    assert result.code == 2
    assert _errors(result.err) == ["clusters/c1.yaml:29: spec.budgets[0].devices.gpu.nvidia.com",
                                   "workloads/a-broken.yaml:9: spec.gpu.sharng"]
    assert result.err.rstrip().endswith("gpuc: 2 error(s)")


def test_a_broken_cluster_is_set_aside_without_echoes(fleet, monkeypatch):
    """A cluster that does not validate is not compiled, its workloads are not called unknown, and the other
    clusters are still compiled and checked."""
    broken = cluster_doc("c2")
    broken["spec"]["nodePools"][0]["gpu"]["modle"] = "H100-80GB"
    root = fleet(clusters=[_budgeted(), broken], workloads={
        "on-c2.yaml": [workload_doc("there", "research", clusters=["c2"], gpu={"count": 1})],
        "team.yaml": [workload_doc("example", "research", clusters=["c1"], replicas=3, gpu={"count": 1})]})
    monkeypatch.chdir(root)
    result = gpuc("validate", ".")
    assert result.code == 2
    assert _errors(result.err) == ["clusters/c1.yaml:29: spec.budgets[0].devices.gpu.nvidia.com",
                                   "clusters/c2.yaml:21: spec.nodePools[0].gpu.modle"], result.err
    assert "unknown cluster" not in result.err


def test_a_rule_error_sets_its_workload_aside_and_compiles_the_rest(fleet, monkeypatch):
    root = fleet(clusters=[_budgeted()], workloads={
        "a.yaml": [workload_doc("odd", "research", gpu={"count": 1, "class": "no-such.example.com"})],
        "team.yaml": [workload_doc("example", "research", replicas=3, gpu={"count": 1})]})
    monkeypatch.chdir(root)
    result = gpuc("plan", ".")
    assert result.code == 2
    assert _errors(result.err) == ["clusters/c1.yaml:29: spec.budgets[0].devices.gpu.nvidia.com", "workloads/a.yaml:9: spec.gpu.class"]


# ------------------------------------------------------------------------------------- budgets nobody uses

def test_a_budget_on_a_namespace_no_workload_uses_warns_with_did_you_mean(fleet, monkeypatch):
    doc = cluster_doc(budgets=[{"namespace": "research", "devices": {"gpu.nvidia.com": 4}},
                               {"namespace": "reserch", "devices": {"gpu.nvidia.com": 4}}])
    workloads = {"w.yaml": [workload_doc("example", "research", gpu={"count": 1})]}
    root = fleet(clusters=[doc], workloads=workloads)
    monkeypatch.chdir(root)
    result = gpuc("validate", ".")
    assert result.code == 0
    (line,) = [line for line in result.err.splitlines() if ": warning: " in line]
    assert line.startswith("clusters/c1.yaml:") and "spec.budgets[1].namespace: no workload of this fleet runs in namespace 'reserch'" in line
    assert line.endswith("[unused-budget]") and "hint: did you mean 'research'?" in result.err
    doc["spec"]["acknowledge"].append({"warning": "unused-budget", "namespaces": ["reserch"], "reason": "their own notebooks claim there"})
    assert gpuc("validate", fleet(clusters=[doc], workloads=workloads)).err == ""


def test_a_budget_whose_only_workload_is_broken_is_not_called_unused(fleet, monkeypatch):
    doc = cluster_doc(budgets=[{"namespace": "research", "devices": {"gpu.nvidia.com": 4}}])
    root = fleet(clusters=[doc], workloads={"w.yaml": [workload_doc("example", "research", gpu={"count": 1, "sharng": "MPS"})]})
    result = gpuc("validate", root)
    assert result.code == 2 and "unused-budget" not in result.err and "sharng" in result.err


# ------------------------------------------------------------------------------------- entries gpuc cannot read

@pytest.mark.parametrize("make, why", [
    (lambda p: os.symlink("../missing.yaml", p / "gone.yaml"), "gone.yaml: error: (file): is a symbolic link to '../missing.yaml', which does not exist"),
    (lambda p: os.symlink("gone", p / "gone.yaml"), "gone.yaml: error: (file): is a symbolic link to 'gone', which does not exist"),
    (lambda p: os.symlink(p.parent / "elsewhere", p / "team"), "team: error: (file): is a symbolic link to the directory"),
    (lambda p: os.mkfifo(p / "pipe.yaml"), "pipe.yaml: error: (file): is not a regular file"),
], ids=["dangling", "loop", "directory-link", "fifo"])
def test_an_entry_gpuc_cannot_read_is_an_error_naming_it(fleet, tmp_path, monkeypatch, make, why):
    root = fleet()
    (root / "elsewhere").mkdir()
    make(root / "workloads")
    monkeypatch.chdir(root)
    for command in (["validate", "."], ["render", ".", "-o", tmp_path / "out"], ["render", ".", "-o", tmp_path / "out"]):
        result = gpuc(*command)  # the second render plans with the cache, which must not hide it either
        assert result.code == 2 and result.err.startswith(f"workloads/{why}"), result.err
