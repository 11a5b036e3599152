"""`gpuc upgrade`: which changes one commit cannot take, the steps that take them instead, and what runs after each.

Given a fleet committed as `base` in a git repository, When an intent change is made, Then the hazards, the steps
(their spec.transition, checks and pod fates) and the files are as the tables say. tests/real/test_real_transitions.py
drives the same plans through the real Argo CD, API server and scheduler.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from compiler.emit.upgrade.hazards import KUBERNETES, MIG_RELAYOUT, OPERATOR_SWAP, POOL_HANDOVER, RELEASE_SWAP, hazards
from compiler.emit.upgrade.shape import busy_pools, shape_of
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.upgrade import upgrade_fleet

from conftest import cluster_doc, deep_update, gpuc, workload_doc, write_fleet

H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}
A100_DP = {"name": "a100", "nodes": 2, "gpu": {"model": "A100-80GB", "count": 8}, "allocation": "devicePlugin"}
A100_MIG = {"name": "a100", "nodes": 2, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
ON_H100 = {"require": {"productName": "NVIDIA H100 80GB HBM3"}}
TRAIN = workload_doc("train", "research", gpu={"count": 2, **ON_H100})
NOTEBOOK = workload_doc("nb", "research", gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": 1}]}})
OPERATOR_26_7 = {"mode": "helm", "version": "v26.7.0"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


def given(tmp_path: Path, cluster: dict, workloads: list[dict]) -> Path:
    """A git repository whose fleet/ is committed and tagged `base`; returns the fleet directory."""
    repo = tmp_path / "repo"
    fleet = write_fleet(repo / "fleet", [cluster], {"w.yaml": workloads})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "tag", "base")
    return fleet


def change(fleet: Path, patch: dict | None = None, pools: list | None = None, workloads: list[dict] | None = None) -> None:
    """When: the cluster intent patched (and its pools or the workloads replaced), uncommitted as in a working tree."""
    path = fleet / "clusters" / "c1.yaml"
    doc = yaml.safe_load(path.read_text())
    deep_update(doc["spec"], patch or {})
    if pools is not None:
        doc["spec"]["nodePools"] = pools
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    if workloads is not None:
        (fleet / "workloads" / "w.yaml").write_text(yaml.safe_dump_all(workloads, sort_keys=False))


def compiled(fleet: Path):
    outcome = compile_fleet(fleet, CompileOptions(only="c1", detail=True, allow_infeasible=True)).clusters["c1"]
    assert outcome.compiled is not None, outcome.infeasible
    return outcome


# -- which changes one commit cannot take -------------------------------------------------------------------------------

Case = tuple[dict, list, dict, list | None, list[dict], set[str]]  # base spec, base pools, head patch, head pools, workloads, kinds
HAZARDS: dict[str, Case] = {
    "a patch release of the same driver line": ({"draDriver": {"version": "0.5.0"}}, [H100], {"draDriver": {"version": "0.5.1"}},
                                                None, [TRAIN], set()),
    "25.12 to 0.5: chart and release renamed": ({}, [H100], {"draDriver": {"version": "0.5.1"}}, None, [TRAIN], {RELEASE_SWAP}),
    "the driver's namespace moved": ({}, [H100], {"draDriver": {"namespace": "dra"}}, None, [TRAIN], {RELEASE_SWAP}),
    "a pool from the device plugin to DRA": ({}, [H100, A100_DP], {}, [H100, {**A100_DP, "allocation": "dra"}], [TRAIN],
                                             {POOL_HANDOVER}),
    "a pool from DRA to the device plugin": ({}, [H100, {**A100_DP, "allocation": "dra"}], {}, [H100, A100_DP], [TRAIN],
                                             {POOL_HANDOVER}),
    "ClusterPolicy to GPUCluster": ({"gpuOperator": OPERATOR_26_7}, [H100], {"gpuOperator": {"mode": "gpuCluster"},
                                                                             "draDriver": {"version": "0.5.1"}}, None, [TRAIN],
                                    {OPERATOR_SWAP}),
    "a Kubernetes minor": ({}, [H100], {"kubernetesVersion": "1.35"}, None, [TRAIN], {KUBERNETES}),
    "a MIG layout under a running notebook": ({}, [A100_MIG], {}, [{**A100_MIG, "mig": {"layout": "all-1g.10gb"}}], [NOTEBOOK],
                                              {MIG_RELAYOUT}),
    "a MIG layout of an idle pool": ({}, [H100, A100_MIG], {}, [H100, {**A100_MIG, "mig": {"layout": "all-1g.10gb"}}], [TRAIN],
                                     set()),
    "more replicas": ({}, [H100], {}, None, [TRAIN, workload_doc("serve", "research", gpu={"count": 1, **ON_H100})], set()),
}


@pytest.mark.parametrize("case", HAZARDS, ids=list(HAZARDS))
def test_a_change_is_unsafe_as_one_commit_exactly_when_both_sides_would_serve_or_take_the_same_gpus(tmp_path: Path, case: str) -> None:
    base_spec, base_pools, head_patch, head_pools, workloads, kinds = HAZARDS[case]
    fleet = given(tmp_path, cluster_doc("c1", pools=base_pools, **base_spec), workloads)
    before = compiled(fleet)
    change(fleet, head_patch, head_pools)
    after = compiled(fleet)
    shape = shape_of(before.compiled)
    found = hazards(shape, shape_of(after.compiled), busy_pools(shape, before.placement))
    assert {h.kind for h in found} == kinds, [h.message for h in found]


# -- the steps -----------------------------------------------------------------------------------------------------------

STEPS: dict[str, tuple[Case, list[dict | None]]] = {
    "driver line": (HAZARDS["25.12 to 0.5: chart and release renamed"],
                    [{"draDriver": {"installed": False}}, None]),
    "two pools to DRA, one at a time": (
        ({}, [H100, A100_DP, {**A100_DP, "name": "a100b"}], {},
         [H100, {**A100_DP, "allocation": "dra"}, {**A100_DP, "name": "a100b", "allocation": "dra"}], [TRAIN], {POOL_HANDOVER}),
        [{"nodePools": {"a100": {"allocation": "none"}}},
         {"nodePools": {"a100": {"allocation": "dra"}}},
         {"nodePools": {"a100": {"allocation": "dra"}, "a100b": {"allocation": "none"}}},
         None]),
    "operator resource": (HAZARDS["ClusterPolicy to GPUCluster"],
                          [{"gpuOperator": {"customResource": "none"}, "draDriver": {"installed": False}}, None]),
    "kubernetes": (HAZARDS["a Kubernetes minor"], [None]),
    "mig layout": (HAZARDS["a MIG layout under a running notebook"], [None]),
}


def plan_for(tmp_path: Path, case: Case):
    base_spec, base_pools, head_patch, head_pools, workloads, _ = case
    fleet = given(tmp_path, cluster_doc("c1", pools=base_pools, **base_spec), workloads)
    change(fleet, head_patch, head_pools)
    return fleet, upgrade_fleet(fleet, "base").clusters[0]


@pytest.mark.parametrize("case", STEPS, ids=list(STEPS))
def test_each_change_is_staged_as_the_table_says_and_every_step_is_free_of_hazards(tmp_path: Path, case: str) -> None:
    """upgrade_fleet compiles every step and refuses (AssertionError) a plan where two consecutive steps keep a hazard
    the steps do not answer with a precondition: that it returns is the check."""
    spec, holds = STEPS[case]
    _, plan = plan_for(tmp_path, spec)
    assert [s.transition and {k: v for k, v in s.transition.items() if k not in ("step", "steps", "change")} for s in plan.steps] == holds
    for step in plan.steps:
        assert step.files and step.done, step.title
        if step.transition is not None:
            assert (step.transition["step"], step.transition["steps"]) == (step.number, len(plan.steps))


def test_the_driver_swap_keeps_every_running_pod_and_retires_the_old_release_first(tmp_path: Path) -> None:
    _, plan = plan_for(tmp_path, HAZARDS["25.12 to 0.5: chart and release renamed"])
    retire, install = plan.steps
    assert [(p.pod, p.fate) for p in retire.pods] == [("research/train-0", "kept")]
    assert [(p.pod, p.fate) for p in install.pods] == [("research/train-0", "kept")]
    assert not any(f.startswith("argocd/c1-dra-driver-nvidia-gpu") or f.startswith("argocd/c1-nvidia-dra-driver-gpu")
                   for f in retire.files), "step 1 runs neither driver release"
    assert "argocd/c1-dra-driver-nvidia-gpu.yaml" in install.files
    kinds = [c.kind for c in retire.done]
    assert kinds == ["absent", "absent", "no-pods", "no-slices"], kinds
    assert [c.kind for c in retire.before] == ["finalizer"]


def test_a_repartitioned_pool_restarts_the_pods_that_held_its_mig_devices(tmp_path: Path) -> None:
    _, plan = plan_for(tmp_path, HAZARDS["a MIG layout under a running notebook"])
    (step,) = plan.steps
    assert [(p.pod, p.fate) for p in step.pods] == [("research/nb-0", "restarted")]
    assert [c.kind for c in step.before] == ["cordoned", "no-gpu-pods"]
    # the kubelet plugin publishes the MIG devices it found at start-up: restarted once the layout is applied, before
    # the slices count as published (tests/real/test_real_transitions.py saw the old layout's devices published without)
    assert [c.kind for c in step.done] == ["node-labels", "node-label", "restarted", "slices", "uncordoned", "application"]
    assert step.done[2].target == {"namespace": "nvidia-dra-driver-gpu", "daemonSet": "nvidia-dra-driver-gpu-kubelet-plugin",
                                   "nodes": ["a100-0", "a100-1"]}


def test_the_move_to_gpucluster_drains_every_gpu_pod_and_places_them_again_at_the_end(tmp_path: Path) -> None:
    _, plan = plan_for(tmp_path, HAZARDS["ClusterPolicy to GPUCluster"])
    first, second = plan.steps
    assert [(p.pod, p.fate) for p in first.pods] == [("research/train-0", "waiting")]
    assert [(p.pod, p.fate) for p in second.pods] == [("research/train-0", "placed")]
    assert first.intent == {}  # the base already runs GPU Operator 26.7, whose chart can leave its ClusterPolicy out
    values = yaml.safe_load(first.files["values/gpu-operator.yaml"])
    assert values["clusterPolicy"]["deployCR"] is False and not values.get("gpuCluster", {}).get("deployCR", False)
    assert yaml.safe_load(second.files["values/gpu-operator.yaml"])["gpuCluster"]["deployCR"] is True


def test_the_clusterpolicy_is_deleted_in_the_background_by_argo_cd_and_by_hand_under_pulumi(tmp_path: Path) -> None:
    """The ClusterPolicy reconciler recreates its operands while a foreground deletion waits for them, so it never goes
    (seen with the real operator: tests/real/test_real_transitions.py): Argo CD prunes the GPU Operator's objects in the
    background. Helm keeps the ClusterPolicy its chart stops rendering, so a cluster deployed by `pulumi up` deletes it
    by hand, in the background, before the step counts as done."""
    fleet, plan = plan_for(tmp_path / "argocd", HAZARDS["ClusterPolicy to GPUCluster"])
    for step in plan.steps:
        apps = {Path(f).name: yaml.safe_load(text) for f, text in step.files.items() if f.startswith("argocd/")}
        options = {name: app["spec"]["syncPolicy"]["syncOptions"] for name, app in apps.items() if app.get("kind") == "Application"}
        assert "PrunePropagationPolicy=background" in options["c1-gpu-operator.yaml"]
        assert [name for name, opts in options.items() if any(o.startswith("PrunePropagationPolicy") for o in opts)] == \
            ["c1-gpu-operator.yaml"], options  # the others keep Argo CD's default, foreground
    assert [c.kind for c in plan.steps[0].done if c.target.get("kind") == "ClusterPolicy"] == ["absent"]

    base_spec, base_pools, head_patch, head_pools, workloads, kinds = HAZARDS["ClusterPolicy to GPUCluster"]
    doc = cluster_doc("c1", pools=base_pools, **base_spec)
    del doc["spec"]["gitops"]
    fleet = given(tmp_path / "pulumi", doc, workloads)
    change(fleet, head_patch, head_pools)
    first = upgrade_fleet(fleet, "base").clusters[0].steps[0]
    policy = [c for c in first.done if c.target.get("kind") == "ClusterPolicy"]
    assert [c.kind for c in policy] == ["deleted", "absent"]
    assert "`kubectl delete clusterpolicy cluster-policy --cascade=background`" in policy[0].text


def test_a_step_rendered_from_its_intent_is_the_tree_the_plan_wrote(tmp_path: Path) -> None:
    """What the user commits for a step (spec.transition added to the Cluster, rendered by gpuc) is byte for byte the
    tree the plan shows: the plan and the render are one compilation."""
    fleet, plan = plan_for(tmp_path, STEPS["two pools to DRA, one at a time"][0])
    step = plan.steps[1]
    git(fleet.parent, "checkout", "base", "--", "fleet")  # a step starts from the intent as the cluster runs it
    change(fleet, {"transition": step.transition})
    out = tmp_path / "rendered"
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 0, result.err
    rendered = {str(p.relative_to(out / "c1")): p.read_text() for p in (out / "c1").rglob("*") if p.is_file()}
    assert rendered == step.files


def test_the_cli_writes_the_plan_and_every_steps_tree_and_says_what_to_commit(tmp_path: Path) -> None:
    fleet, _ = plan_for(tmp_path, HAZARDS["25.12 to 0.5: chart and release renamed"])
    out = tmp_path / "upgrade"
    result = gpuc("upgrade", fleet, "--base", "base", "-o", out)
    assert result.code == 0, result.err
    assert "### Step 1 of 2: Retire the DRA driver release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu" in result.out
    assert "installed: false" in result.out and "each step but the last adds `spec.transition` to `clusters/c1.yaml`" in result.out
    written = json.loads((out / "c1" / "plan.json").read_text())
    assert written["generatedBy"] == "gpuc upgrade" and [s["step"] for s in written["clusters"][0]["steps"]] == [1, 2]
    assert yaml.safe_load((out / "c1" / "step-1" / "transition.yaml").read_text())["transition"]["draDriver"] == {"installed": False}
    assert (out / "c1" / "step-2" / "rendered" / "argocd" / "c1-dra-driver-nvidia-gpu.yaml").is_file()
    again = gpuc("upgrade", fleet, "--base", "base", "-o", out, "--output", "json")  # its own plan is replaced
    assert again.code == 0 and json.loads(again.out)["clusters"][0]["staged"] is True


def test_a_change_one_commit_takes_gets_no_steps(tmp_path: Path) -> None:
    fleet, plan = plan_for(tmp_path, HAZARDS["more replicas"])
    assert not plan.staged and plan.steps == []
    result = gpuc("upgrade", fleet, "--base", "base")
    assert result.code == 0 and "is safe as one commit" in result.out


# -- what gpuc cannot stage, and bad input -------------------------------------------------------------------------------

Edit = Callable[[Path], None]
REFUSED: dict[str, tuple[Case, str, str]] = {
    "two kinds at once": (({}, [H100, A100_DP], {"draDriver": {"version": "0.5.1"}}, [H100, {**A100_DP, "allocation": "dra"}],
                           [TRAIN], set()), "spec.nodePools[1].allocation: this change is both a driver-release change",
                          "split it: merge the driver-release change first"),
    "a skipped minor": (({}, [H100], {"kubernetesVersion": "1.36"}, None, [TRAIN], set()),
                        "spec.kubernetesVersion: Kubernetes 1.34 -> 1.36 skips a minor", 'set kubernetesVersion "1.35" first'),
    "a downgrade": (({}, [H100], {"kubernetesVersion": "1.33", "acknowledge": [{"warning": "dra-beta", "reason": "test"}]}, None,
                     [TRAIN], set()), "Kubernetes 1.34 -> 1.33 is a downgrade", 'keep kubernetesVersion "1.34"'),
    "a GPUCluster given to another team's GPU Operator": (
        ({"gpuOperator": {"mode": "gpuCluster", "version": "v26.7.0"}, "draDriver": {"version": "0.5.1"}}, [H100],
         {"gpuOperator": {"mode": "patch"}}, None, [TRAIN], set()),
        "spec.gpuOperator.mode: the GPU Operator's GPUCluster would give way to a GPU Operator another team installs",
        "move to gpuOperator.mode helm first"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_change_gpuc_cannot_stage_is_refused_at_its_line_with_what_to_do_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    spec, message, hint = REFUSED[case]
    base_spec, base_pools, head_patch, head_pools, workloads, _ = spec
    fleet = given(tmp_path, cluster_doc("c1", pools=base_pools, **base_spec), workloads)
    change(fleet, head_patch, head_pools)
    out = tmp_path / "upgrade"
    result = gpuc("upgrade", fleet, "--base", "base", "-o", out)
    assert result.code == 2, result.out + result.err
    assert "clusters/c1.yaml:" in result.err and message in result.err and hint in result.err, result.err
    assert not out.exists()


TRANSITION_ERRORS = {
    "a pool the cluster has not": ({"step": 1, "steps": 2, "change": "x", "nodePools": {"h10": {"allocation": "none"}}},
                                   "spec.transition.nodePools.h10: no node pool 'h10' in this cluster", "did you mean 'h100'?"),
    "the last step written out": ({"step": 2, "steps": 2, "change": "x"}, "spec.transition",
                                  "the last step is the intent without spec.transition; remove it"),
    "an operator hold without an operator chart": ({"step": 1, "steps": 2, "change": "x", "gpuOperator": {"customResource": "none"}},
                                                   "spec.transition.gpuOperator: gpuOperator.mode none deploys no GPU Operator chart",
                                                   "remove spec.transition.gpuOperator"),
}


@pytest.mark.parametrize("case", TRANSITION_ERRORS, ids=list(TRANSITION_ERRORS))
def test_a_wrong_transition_is_an_error_at_its_line(tmp_path: Path, case: str) -> None:
    transition, message, hint = TRANSITION_ERRORS[case]
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("c1", gpuOperator={"mode": "none"}, transition=transition,
                                                         acknowledge=[{"warning": "device-plugin-off", "reason": "test"}])],
                        {"w.yaml": [TRAIN]})
    result = gpuc("validate", fleet)
    assert result.code == 2 and "clusters/c1.yaml:" in result.err and message in result.err and hint in result.err, result.err


def test_a_state_that_is_not_the_bases_cluster_is_refused(tmp_path: Path) -> None:
    """The running cluster publishes DRA devices on a pool the base keeps on the device plugin: --base names another
    commit than the one the cluster runs, and a plan from it would be wrong."""
    fleet, _ = plan_for(tmp_path, HAZARDS["a pool from the device plugin to DRA"])
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "a100-0-gpu.nvidia.com-0"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "a100-0", "pool": {"name": "a100-0", "generation": 1, "resourceSliceCount": 1},
                 "devices": []}}]}))
    result = gpuc("upgrade", fleet, "--base", "base", "--cluster", "c1", "--state", state)
    assert result.code == 2, result.out
    assert f"{state}:" in result.err and "publishes gpu.nvidia.com devices on node a100-0, but at base pool a100 is allocated by the " \
                                        "device plugin" in result.err, result.err


def test_a_plan_is_never_written_over_a_directory_gpuc_did_not_write(tmp_path: Path) -> None:
    fleet, _ = plan_for(tmp_path, HAZARDS["25.12 to 0.5: chart and release renamed"])
    out = tmp_path / "upgrade"
    (out / "c1").mkdir(parents=True)
    (out / "c1" / "notes.md").write_text("mine")
    result = gpuc("upgrade", fleet, "--base", "base", "-o", out)
    assert result.code == 2 and "is not a plan gpuc upgrade wrote" in result.err
    assert sorted(p.name for p in (out / "c1").iterdir()) == ["notes.md"]


# -- gpuc diff points at the plan -----------------------------------------------------------------------------------------

def test_diff_says_a_change_needs_stages_and_what_it_deletes_and_leaves_behind(tmp_path: Path) -> None:
    fleet, _ = plan_for(tmp_path, HAZARDS["25.12 to 0.5: chart and release renamed"])
    result = gpuc("diff", fleet, "--base", "base", "--fail-on", "staged")
    assert result.code == 1, result.err
    assert "### Not safe as one commit: stage it" in result.out and "gpuc upgrade FLEET --base base -o upgrade" in result.out
    assert "--fail-on staged tripped: c1 cannot take the change as one commit" in result.err
    report = json.loads(gpuc("diff", fleet, "--base", "base", "--output", "json").out)
    cluster = report["clusters"][0]
    assert cluster["staged"] and "staged" in report["conditions"]
    assert cluster["prunes"] == ["every object of release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu (its Application "
                                 "c1-nvidia-dra-driver-gpu is deleted with them)"]
    assert any("CustomResourceDefinitions of chart nvidia-dra-driver-gpu" in o for o in cluster["orphans"]), cluster["orphans"]


def test_diff_of_a_change_one_commit_takes_raises_no_staged_gate(tmp_path: Path) -> None:
    fleet, _ = plan_for(tmp_path, HAZARDS["more replicas"])
    result = gpuc("diff", fleet, "--base", "base", "--fail-on", "staged")
    assert result.code == 0 and "Not safe as one commit" not in result.out


# -- what makes one-commit changes safe in the first place ---------------------------------------------------------------

def test_chart_applications_take_their_objects_with_them_when_removed(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("c1")], {"w.yaml": [TRAIN]})
    out = tmp_path / "out"
    assert gpuc("render", fleet, "-o", out).code == 0
    apps = {p.name: yaml.safe_load(p.read_text()) for p in (out / "c1" / "argocd").glob("c1-*.yaml")}
    charts = {n for n in apps if n != "c1-gpuc.yaml"}
    assert charts and all(apps[n]["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"] for n in charts)
    assert "finalizers" not in apps["c1-gpuc.yaml"]["metadata"]  # claims and NIM services stay when the tree's app goes


def test_a_claim_keeps_its_name_from_kubernetes_1_32_to_1_33(tmp_path: Path) -> None:
    """The API server stores one claim whichever resource.k8s.io version wrote it; a name hashed from the v1beta1 shape
    would change with the upgrade and restart every pod."""
    names = []
    for minor in ("1.32", "1.33"):
        fleet = write_fleet(tmp_path / minor, [cluster_doc("c1", kubernetes=minor)], {"w.yaml": [TRAIN]})
        names.append(sorted(o.name for o in compiled(fleet).compiled.objects if o.kind == "ResourceClaimTemplate"))
    assert names[0] == names[1], names


def test_pulumi_replaces_a_renamed_driver_release_delete_first_under_its_old_name(tmp_path: Path) -> None:
    """Pulumi creates a resource of a new name before it deletes the old one; keyed by the release's name, a 25.12 ->
    0.5 stack would run both kubelet plugins during `pulumi up`. The release the compiler emits knows its former name,
    and the stack registers it as an alias replaced delete-first (tests/real/test_real_transitions.py runs the engine)."""
    import pulumi

    from modules.helm import release_options

    fleet = write_fleet(tmp_path / "fleet", [cluster_doc("c1", driver="0.5.1")], {"w.yaml": [TRAIN]})
    releases = {r.component: r for r in compiled(fleet).compiled.releases}
    options = release_options(releases["dra-driver"])
    assert [a.name for a in options["aliases"] if isinstance(a, pulumi.Alias)] == ["nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"]
    assert options["delete_before_replace"] is True and options["replace_on_changes"] == ["name"]
    assert release_options(releases["gpu-operator"]) == {}


def test_kubernetes_1_32_to_1_33_rewrites_the_claims_in_v1beta2_and_restarts_nothing(tmp_path: Path) -> None:
    """v1beta1 requests have no `exactly`; the stored claim is the same object either way, so the diff calls it changed
    (its apiVersion), not replaced, and the pods that hold the claims run on."""
    case: Case = ({}, [H100], {"kubernetesVersion": "1.33"}, None, [TRAIN], {KUBERNETES})
    fleet = given(tmp_path, cluster_doc("c1", kubernetes="1.32", pools=[H100]), [TRAIN])
    change(fleet, case[2])
    (step,) = upgrade_fleet(fleet, "base").clusters[0].steps
    assert [(p.pod, p.fate) for p in step.pods] == [("research/train-0", "kept")] and step.disrupts == []
    report = json.loads(gpuc("diff", fleet, "--base", "base", "--output", "json").out)
    statuses = {o["kind"]: o["status"] for o in report["clusters"][0]["objects"]}
    assert statuses.get("ResourceClaimTemplate") == "changed" and "replaced" not in statuses.values(), statuses


@pytest.mark.parametrize(("base", "head", "serving"), [("1.32", "1.33", "resource.k8s.io/v1beta1=true"),
                                                       ("1.33", "1.34", "resource.k8s.io/v1beta2=true"),
                                                       ("1.34", "1.35", None)])
def test_the_upgraded_control_plane_serves_the_running_trees_beta_version_until_the_step_is_synced(
        tmp_path: Path, base: str, head: str, serving: str | None) -> None:
    """1.34 serves v1beta2 only on request (kube-apiserver v1.34.4 pkg/controlplane/instance.go
    betaAPIGroupVersionsDisabledByDefault): until the v1 tree is synced, Argo CD compares the running v1beta2 one, so the
    plan says how to start the new API server, in words and as the check's data."""
    fleet = given(tmp_path, cluster_doc("c1", kubernetes=base, pools=[H100]), [TRAIN])
    change(fleet, {"kubernetesVersion": head})
    (step,) = upgrade_fleet(fleet, "base").clusters[0].steps
    check = step.before[0]
    assert check.kind == "server-version" and check.target.get("runtimeConfig") == serving
    assert (f"--runtime-config={serving}" in check.text) == (serving is not None)


def test_another_teams_clusterpolicy_goes_by_its_owner_before_the_gpucluster_comes(tmp_path: Path) -> None:
    """In mode patch the ClusterPolicy is not gpuc's to delete: step 1 retires gpuc's DRA driver release and waits for the
    owner to remove the ClusterPolicy; step 2 deploys the GPUCluster."""
    fleet = given(tmp_path, cluster_doc("c1", driver="0.5.1", pools=[H100], gpuOperator={"mode": "patch"}), [TRAIN])
    change(fleet, {"gpuOperator": {"mode": "gpuCluster", "version": "v26.7.0"}})
    first, second = upgrade_fleet(fleet, "base").clusters[0].steps
    assert first.transition is not None and "gpuOperator" not in first.transition and first.transition["draDriver"] == {"installed": False}
    owner = [c for c in first.before if c.kind == "absent"]
    assert [c.target["kind"] for c in owner] == ["ClusterPolicy"] and "owner has removed it" in owner[0].text
    assert [c.kind for c in second.done][:1] == ["ready"]
