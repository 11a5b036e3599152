"""One gated pipeline (issue 19): every backend stops exactly where `gpuc render` refuses, with render's
escape hatches, and the package's imports follow the stage order."""

from __future__ import annotations

import ast
import json

import pulumi
import pytest

from conftest import NIM_SECRETS, REPO, cluster_doc, gpuc, nim_model, workload_doc
from pulumi_harness import Registered, run_stack


def _too_many_pods(fleet):
    """Two nodes of 8 H100s and three pods of 8 GPUs: every pod is valid, the third has no room."""
    return fleet([cluster_doc("c1")], {"w.yaml": [workload_doc("big", "team", replicas=3, gpu={"count": 8})]})


def _refused_output(fleet):
    """A selector reading an attribute no driver publishes: the scheduler would never match it."""
    require = {"cel": ["device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'"]}
    return fleet([cluster_doc("c1")], {"w.yaml": [workload_doc("w", "team", gpu={"count": 1, "require": require})]})


def _stack(path, **extra: str) -> tuple[pulumi.RunError | None, list[Registered]]:
    registered: list[Registered] = []
    try:
        run_stack("c1", {"gpuc:fleet": str(path), **extra}, partial=registered)
    except pulumi.RunError as exc:
        return exc, registered
    return None, registered


def _kubernetes(registered: list[Registered]) -> list[Registered]:
    return [r for r in registered if r.custom and r.type.startswith("kubernetes:")]


def test_a_fleet_render_refuses_for_placement_registers_nothing(fleet, tmp_path):
    path = _too_many_pods(fleet)
    assert gpuc("render", path, "-o", tmp_path / "out").code == 1
    error, registered = _stack(path)
    assert error is not None and "cannot be placed on the cluster, so nothing was registered" in str(error)
    assert "pod big-2 of team/big cannot be placed on cluster 'c1'" in str(error)
    assert "workloads/w.yaml:" in str(error) and "Traceback" not in str(error)
    assert _kubernetes(registered) == []


def test_allow_infeasible_is_the_same_escape_hatch_in_both_backends(fleet, tmp_path):
    path = _too_many_pods(fleet)
    assert gpuc("render", path, "-o", tmp_path / "out", "--allow-infeasible").code == 0
    error, registered = _stack(path, **{"gpuc:allowInfeasible": "true"})
    assert error is None
    rendered = sorted(p.name for p in (tmp_path / "out" / "c1").glob("*.yaml")
                      if p.name not in ("kustomization.yaml", "node-labels.yaml"))
    assert len([r for r in _kubernetes(registered) if not r.type.endswith("helm.sh/v3:Release")]) == len(rendered)


def test_output_the_checks_refuse_registers_nothing(fleet, tmp_path):
    path = _refused_output(fleet)
    render = gpuc("render", path, "-o", tmp_path / "out")
    assert render.code == 1 and "noSuchAttribute" in render.err
    error, registered = _stack(path, **{"gpuc:allowInfeasible": "true"})  # not an escape from refused output
    assert error is not None and "compiles to output the cluster would refuse" in str(error)
    assert "noSuchAttribute" in str(error)
    assert _kubernetes(registered) == []


def _nim_fleet(fleet, count: int):
    workload = workload_doc("llm", "nim", model=nim_model(), gpu={"count": count}, secrets=NIM_SECRETS)
    return fleet([cluster_doc("c1")], {"w.yaml": [workload]})


def test_allow_replace_in_the_stack_is_judged_against_gpuc_previous(fleet, tmp_path):
    """A NIMService whose draResources changes is replaced: refused unless accepted, as in render."""
    rendered = tmp_path / "rendered"
    assert gpuc("render", _nim_fleet(fleet, 1), "-o", rendered).code == 0
    changed = _nim_fleet(fleet, 2)
    assert gpuc("render", changed, "-o", rendered).code == 1  # the same refusal render gives
    error, registered = _stack(changed, **{"gpuc:previous": str(rendered)})
    assert error is not None and "spec.draResources" in str(error) and "--allow-replace" in str(error)
    assert _kubernetes(registered) == []
    error, registered = _stack(changed, **{"gpuc:previous": str(rendered), "gpuc:allowReplace": "true"})
    assert error is None and _kubernetes(registered)


def test_a_missing_previous_tree_is_a_clear_stack_error(fleet, tmp_path):
    error, _ = _stack(_nim_fleet(fleet, 1), **{"gpuc:previous": str(tmp_path / "nowhere")})
    assert error is not None and "gpuc:previous" in str(error) and "is not a directory" in str(error)


def test_diff_reports_output_the_head_would_have_refused(fleet, tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    path = fleet([cluster_doc("c1")], {"w.yaml": [workload_doc("w", "team", gpu={"count": 1})]})
    subprocess.run(["cp", "-r", f"{path}/.", str(repo)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    broken = _refused_output(fleet)
    (repo / "workloads" / "w.yaml").write_text((broken / "workloads" / "w.yaml").read_text())
    result = gpuc("diff", repo, "--base", "HEAD")
    assert result.code == 0
    assert "fits -> **does not fit**; **output refused**: 1 finding(s)" in result.out and "noSuchAttribute" in result.out
    gated = gpuc("diff", repo, "--base", "HEAD", "--fail-on", "infeasible", "--output", "json")
    assert gated.code == 1 and json.loads(gated.out)["gated"] == ["infeasible"]


# ------------------------------------------------------------------------------ stage order

STAGES = ["load", "validate", "plan", "lower", "place", "check", "emit"]
BELOW = {"diagnostics", "facts", "cel"}  # libraries every stage may use
ABOVE = {"pipeline", "runner", "cli", "__main__"}  # orchestration and edges


def _imports(path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("compiler")}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_stage_imports_a_later_stage_or_the_orchestration():
    offences = []
    for path in sorted((REPO / "compiler").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        mine = _part(module)
        for target in _imports(path, module):
            theirs = _part(target)
            if mine in BELOW and theirs not in BELOW:
                offences.append(f"{module} (a library) imports {target}")
            elif mine in STAGES and theirs in STAGES and STAGES.index(theirs) > STAGES.index(mine):
                offences.append(f"{module} imports the later stage {target}")
            elif mine in STAGES and theirs in ABOVE:
                offences.append(f"{module} imports the orchestration {target}")
    assert offences == []


def test_the_stage_order_check_catches_an_offence(tmp_path, monkeypatch):
    """The test above is only worth something if it fails on a real offence."""
    bad = REPO / "compiler" / "check" / "_offence_probe.py"
    bad.write_text("from ..emit.tree import object_filename\n")
    try:
        with pytest.raises(AssertionError, match="check._offence_probe imports the later stage compiler.emit.tree"):
            test_no_stage_imports_a_later_stage_or_the_orchestration()
    finally:
        bad.unlink()
