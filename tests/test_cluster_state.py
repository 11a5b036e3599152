"""Planning against the running cluster: `--state` exports and `--kubeconfig` live reads."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import kubectl
import pytest

from compiler.load.state import read_state
from compiler.place import synthesize_for
from compiler.place.inventory.codec import inventory_list

from conftest import cluster_doc, compile_single, gpuc, workload_doc, write_fleet

GPU = "gpu.nvidia.com"
H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}


def fleet_of(root: Path, workloads: list[dict]) -> Path:
    return write_fleet(root, [cluster_doc(pools=[H100])], {"w.yaml": workloads})


def cluster_items(fleet: Path) -> list[dict]:
    """Nodes and the ResourceSlices the cluster's driver published, as the API server holds them."""
    compiled = compile_single(fleet)
    inventory = synthesize_for(compiled)
    nodes = [kubectl.node(n.name, {**compiled.node_labels.get(n.pool, {}), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
             for n in inventory.nodes]
    return nodes + kubectl.slices(inventory_list(inventory))


def held(name: str, node: str, gpus: range, namespace: str = "research") -> dict:
    return kubectl.allocated_claim(name, namespace, [(GPU, node, f"gpu-{i}") for i in gpus], node_name=node, pod=f"{name}-pod")


@pytest.fixture
def export(tmp_path):
    def write(items: list[dict], name: str = "state.yaml", form=kubectl.yaml_export) -> Path:
        path = tmp_path / name
        path.write_text(form(items))
        return path
    return write


def test_every_h100_held_by_a_running_claim_leaves_no_room(tmp_path, export):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    state = export(cluster_items(fleet) + [held("train-a", "h100-0", range(8)), held("train-b", "h100-1", range(8))])
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", state)
    assert result.code == 1, result.out + result.err
    assert "team/llm llm-0: request 'gpu' of llm needs 1 free device on one node: 16 match, 16 are allocated" in result.out
    assert "(16 by claims already in the cluster: research/train-a, research/train-b)" in result.out
    assert "in use before: 16 device(s) held by 2 claim(s) gpuc does not manage (research/train-a, research/train-b)" in result.out


def test_one_gpu_held_shows_in_use_before(tmp_path, export):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    state = export(cluster_items(fleet) + [held("train-a", "h100-0", range(1))])
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", state)
    assert result.code == 0, result.out + result.err
    assert "inventory from " + str(state) in result.out
    pool = next(line.split() for line in result.out.splitlines() if line.strip().startswith("h100 "))
    assert pool[:5] == ["h100", "2", "16", "1", "(6%)"]  # USED BEFORE
    assert pool[5:7] == ["2", "(12%)"]  # USED AFTER
    assert "team/llm  llm-0  h100-0  gpu: gpu-1" in result.out  # gpu-0 is taken
    report = json.loads(gpuc("plan", fleet, "--cluster", "c1", "--state", state, "--output", "json").out)["clusters"][0]
    assert report["inUseBefore"] == {"claims": [{"claim": "research/train-a", "devices": 1}], "gpucClaims": 0}
    assert report["pools"][0]["before"]["gpusUsed"] == 1


def test_gpucs_own_claims_are_not_counted_twice(tmp_path, export):
    """Sixteen one-GPU replicas fill the cluster; their own claims, found allocated, are placed again, not added."""
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", replicas=16, gpu={"count": 1})])
    compiled = compile_single(fleet)
    (template,) = [o.manifest for o in compiled.objects if o.kind == "ResourceClaimTemplate"]
    claims = []
    for i in range(16):
        node, gpu = f"h100-{i // 8}", i % 8
        pod = f"llm-{i}"
        owner = [{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True, "kind": "Pod", "name": pod, "uid": "u"}]
        if i % 2:  # made from the template: its labels carried over
            claims.append(kubectl.allocated_claim(f"{pod}-gpu-x7k2p", "team", [(GPU, node, f"gpu-{gpu}")], node_name=node, pod=pod,
                                                  labels=template["spec"].get("metadata", {}).get("labels"), spec=template["spec"]["spec"],
                                                  owners=owner, annotations={"resource.kubernetes.io/pod-claim-name": "gpu"}))
        else:  # made from an older template without labels: matched by its owner pod
            claims.append(kubectl.allocated_claim(f"{pod}-gpu-q9z4m", "team", [(GPU, node, f"gpu-{gpu}")], node_name=node, pod=pod,
                                                  owners=owner, annotations={"resource.kubernetes.io/pod-claim-name": "gpu"},
                                                  spec={"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "old"}}]}}))
    state = export(cluster_items(fleet) + claims)
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", state)
    assert result.code == 0, result.out + result.err
    # the eight made from the template gpuc renders now keep their pods where they run; the eight from an older
    # template are replaced with their pods, which the plan says and places anew
    assert ("in use before: no device held by a claim gpuc does not manage; 16 of gpuc's own claim(s) allocated, "
            "8 running pod(s) kept where they are") in result.out
    assert result.err.count("was made from an older version of a gpuc claim: the change replaces the pod") == 8
    # the same claims without anything that ties them to gpuc are somebody else's
    foreign = [kubectl.allocated_claim(c["metadata"]["name"], "team", [(r["driver"], r["pool"], r["device"])
                                                                       for r in c["status"]["allocation"]["devices"]["results"]])
               for c in claims]
    assert gpuc("plan", fleet, "--cluster", "c1", "--state", export(cluster_items(fleet) + foreign, "f.yaml")).code == 1


@pytest.mark.parametrize("form", [kubectl.yaml_export, kubectl.json_export, kubectl.stream_export])
def test_list_json_and_stream_exports_read_alike(tmp_path, export, form):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    items = cluster_items(fleet) + [held("train-a", "h100-0", range(3))]
    state = read_state([str(export(items, form=form))])
    assert sorted(o.label for o in state.objects) == sorted(
        f"{i['kind']} {i['metadata'].get('namespace', '') + '/' if i['metadata'].get('namespace') else ''}{i['metadata']['name']}"
        for i in items)
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", export(items, form=form), "--output", "json")
    assert json.loads(result.out)["clusters"][0]["pools"][0]["before"]["gpusUsed"] == 3


def test_state_in_several_files_and_from_stdin(tmp_path, export):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    slices = export(cluster_items(fleet), "slices.yaml")
    claims = kubectl.yaml_export([held("train-a", "h100-0", range(2))])
    state = read_state([str(slices), "-"], stdin=io.BytesIO(claims.encode()))
    assert state.sources == (str(slices), "<stdin>")
    run = subprocess.run(["gpuc", "plan", str(fleet), "--cluster", "c1", "--state", str(slices), "--state", "-", "--output", "json"],
                         input=claims, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["clusters"][0]["inUseBefore"]["claims"] == [{"claim": "research/train-a", "devices": 2}]
    twice = gpuc("plan", fleet, "--cluster", "c1", "--state", "-", "--state", "-")
    assert twice.code == 2 and "standard input can be read only once" in twice.err


def test_a_file_that_is_not_an_export_names_its_line(tmp_path, export):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {}\n")
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", bad)
    assert result.code == 2
    assert f"{bad}:4: error: items[0]: not a Kubernetes object: metadata.name missing" in result.err
    assert "kubectl get resourceslices,resourceclaims,deviceclasses,nodes -A -o yaml" in result.err
    missing = gpuc("plan", fleet, "--cluster", "c1", "--state", tmp_path / "nope.yaml")
    assert missing.code == 2 and "cannot read the cluster state" in missing.err
    both = gpuc("plan", fleet, "--cluster", "c1", "--state", export([]), "--kubeconfig", tmp_path / "kc")
    assert both.code == 2 and "--state and --kubeconfig/--context both describe the cluster" in both.err


def test_a_state_describes_one_cluster(tmp_path, export):
    root = write_fleet(tmp_path / "f", [cluster_doc("a", pools=[H100]), cluster_doc("b", pools=[H100])], {})
    result = gpuc("plan", root, "--state", export([kubectl.node("n1")]))
    assert result.code == 2 and "a cluster state describes one cluster" in result.err and "--cluster" in result.err


def test_render_and_validate_gate_on_the_running_cluster(tmp_path, export):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    full = export(cluster_items(fleet) + [held("train-a", "h100-0", range(8)), held("train-b", "h100-1", range(8))])
    assert gpuc("validate", fleet).code == 0
    validate = gpuc("validate", fleet, "--cluster", "c1", "--state", full)
    assert validate.code == 1 and "research/train-a" in validate.err
    out = tmp_path / "out"
    assert gpuc("render", fleet, "-o", out, "--cluster", "c1", "--state", full).code == 1 and not out.exists()
    assert gpuc("render", fleet, "-o", out, "--cluster", "c1", "--state", full, "--allow-infeasible").code == 0


def test_diff_fits_then_does_not_fit_on_the_running_cluster(tmp_path, export):
    from test_diff import git

    root = tmp_path / "repo"
    fleet = fleet_of(root / "fleet", [workload_doc("llm", gpu={"count": 1})])
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    (fleet / "workloads" / "w.yaml").write_text(kubectl.yaml.safe_dump(workload_doc("llm", replicas=4, gpu={"count": 2})))
    state = export(cluster_items(fleet) + [held("train-a", "h100-0", range(8)), held("train-b", "h100-1", range(2))])
    empty = gpuc("diff", fleet, "--base", "HEAD", "--fail-on", "infeasible")
    assert empty.code == 0, empty.out + empty.err
    running = gpuc("diff", fleet, "--base", "HEAD", "--fail-on", "infeasible", "--state", state)
    assert running.code == 1, running.out + running.err
    assert "research/train-a" in running.out


def test_live_read_through_the_kubernetes_client(tmp_path):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    items = cluster_items(fleet) + [held("train-a", "h100-0", range(8)), held("train-b", "h100-1", range(7))]
    with kubectl.ApiServer(items, page=1) as server:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        result = gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", kubeconfig, "--context", "ci", "--output", "json")
        assert result.code == 0, result.out + result.err
        report = json.loads(result.out)["clusters"][0]
        assert report["inventory"]["source"].startswith("live: ci (http://127.0.0.1:")
        assert report["inUseBefore"]["claims"] == [{"claim": "research/train-a", "devices": 8}, {"claim": "research/train-b", "devices": 7}]
        assert report["pods"][0]["node"] == "h100-1"
        assert any("continue=1" in r for r in server.requests)  # paged like kubectl
        assert any("labelSelector=app.kubernetes.io" in r for r in server.requests)  # namespaces, configmaps: gpuc's only
    with kubectl.ApiServer(items, forbidden=("resourceclaims",)) as server:
        result = gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", server.kubeconfig(tmp_path / "kc2"))
        assert result.code == 0
        assert "cannot list resourceclaims: 403 Forbidden" in result.err
    unreachable = gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", kubeconfig)
    assert unreachable.code == 2 and "cannot reach the API server" in unreachable.err
    wrong = gpuc("plan", fleet, "--cluster", "c1", "--kubeconfig", kubeconfig, "--context", "prod")
    assert wrong.code == 2 and "kubectl config get-contexts" in wrong.err


def test_a_running_pod_keeps_its_gpus_and_the_new_work_is_planned_around_it(tmp_path, export):
    """A running llm pod holds four GPUs of h100-0; a new two-replica job of eight GPUs each arrives. The allocated
    claim cannot move, so the job gets h100-1 and its second replica is what cannot be placed, not the running llm."""
    llm = workload_doc("llm", gpu={"count": 4})
    fleet = fleet_of(tmp_path / "f", [llm, workload_doc("train", replicas=2, gpu={"count": 8})])
    compiled = compile_single(fleet)
    template = next(o.manifest for o in compiled.objects if o.kind == "ResourceClaimTemplate" and o.name.startswith("llm-"))
    running = kubectl.allocated_claim("llm-7f9c-gpu-x7k2p", "team", [(GPU, "h100-0", f"gpu-{i}") for i in range(4)],
                                      node_name="h100-0", pod="llm-7f9c", labels=template["spec"]["metadata"]["labels"],
                                      spec=template["spec"]["spec"], annotations={"resource.kubernetes.io/pod-claim-name": "gpu"})
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", export(cluster_items(fleet) + [running]), "--output", "json")
    pods = {p["pod"]: p for p in json.loads(result.out)["clusters"][0]["pods"]}
    assert pods["llm-0"]["node"] == "h100-0" and pods["llm-0"]["running"] == "team/llm-7f9c-gpu-x7k2p"
    assert [d["device"] for d in pods["llm-0"]["claims"][0]["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert pods["train-0"]["node"] == "h100-1"
    assert pods["train-1"]["node"] is None and "cannot" not in pods["llm-0"].get("reason", "")
    text = gpuc("plan", fleet, "--cluster", "c1", "--state", export(cluster_items(fleet) + [running], "s2.yaml"))
    assert "h100-0 (running)  gpu: gpu-0, gpu-1, gpu-2, gpu-3" in text.out and "1 running pod(s) kept where they are" in text.out
    assert "by claims already in the cluster: team/llm-7f9c-gpu-x7k2p" in text.out  # why train-1 waits


def test_a_pod_that_finds_its_gpus_taken_by_the_fleet_names_the_workloads_holding_them(tmp_path):
    """Without a state the holders are the fleet's own pods placed before it: the message names them too."""
    fleet = fleet_of(tmp_path / "f", [workload_doc("train-a", "research", gpu={"count": 8}),
                                      workload_doc("train-b", "research", gpu={"count": 8}),
                                      workload_doc("zz-late", gpu={"count": 1})])
    result = gpuc("plan", fleet, "--cluster", "c1")
    assert result.code == 1, result.out + result.err
    assert "16 match, 16 are allocated (16 by earlier pods of research/train-a, research/train-b)" in result.out


def shared_fleet(root: Path) -> Path:
    """One node of 8 H100s whose memory is shared (Fractional: driver 0.5.1, Kubernetes 1.36), a 16Gi fraction to place."""
    pool = {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}
    return write_fleet(root, [cluster_doc(kubernetes="1.36", driver="0.5.1", pools=[pool])],
                       {"w.yaml": [workload_doc("frac", gpu={"sharing": "Fractional", "memory": "16Gi"})]})


def consuming(name: str, gpu: int, memory: str | None, admin: bool = False) -> dict:
    claim = held(name, "h100-0", range(gpu, gpu + 1))
    result = claim["status"]["allocation"]["devices"]["results"][0]
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory}
    if admin:
        result["adminAccess"] = True
    return claim


@pytest.mark.parametrize("memory,fits", [("70Gi", False), ("16Gi", True)])
def test_capacity_running_claims_consume_is_counted_as_consumed(tmp_path, export, memory, fits):
    """Claims sharing each GPU by memory leave 80Gi - what they consume: 10Gi (no room for 16Gi) or 64Gi (room)."""
    fleet = shared_fleet(tmp_path / "f")
    items = cluster_items(fleet) + [consuming(f"other-{i}", i, memory) for i in range(8)]
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", export(items), "--output", "json")
    assert result.code == (0 if fits else 1), result.err
    report = json.loads(result.out)["clusters"][0]
    assert len(report["inUseBefore"]["claims"]) == 8
    assert bool(report["pods"][0].get("node")) is fits


def test_admin_access_claims_hold_no_device(tmp_path, export):
    fleet = fleet_of(tmp_path / "f", [workload_doc("llm", gpu={"count": 1})])
    admins = [consuming(f"monitor-{n}", 0, None, admin=True) for n in range(1)]
    items = cluster_items(fleet) + [held("train-a", "h100-0", range(8)), held("train-b", "h100-1", range(1, 8))]
    for claim in admins:  # the only free GPU, h100-1's gpu-0, is watched by an admin-access claim: still free
        claim["status"]["allocation"]["devices"]["results"][0]["pool"] = "h100-1"
    result = gpuc("plan", fleet, "--cluster", "c1", "--state", export(items + admins), "--output", "json")
    assert result.code == 0, result.out + result.err
    assert json.loads(result.out)["clusters"][0]["pods"][0]["node"] == "h100-1"


def test_a_live_list_covers_what_was_written_only_at_the_same_length():
    """Drift: the API server adds defaults inside list items, but a list that lost or gained an item has drifted."""
    from compiler.load.state import covers

    assert covers({"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "a", "operator": "Exists"}], "status": {}})
    assert not covers({"tolerations": [{"key": "a"}, {"key": "b"}]}, {"tolerations": [{"key": "a"}]})
    assert not covers({"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "a"}, {"key": "b"}]})
