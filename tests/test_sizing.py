"""Sizing for `count: auto` (DESIGN.md section 5) and `gpuc explain`."""

from __future__ import annotations

import json

from compiler.plan.sizing import GIB

from conftest import EXAMPLES, NIM_SECRETS, cluster_doc, compile_single, gpuc, nim_model, objects_of, workload_doc

L40S = {"name": "l40s", "nodes": 2, "gpu": {"model": "L40S-48GB", "count": 4}}
H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}


def plan_of(compiled, name="w1"):
    return next(p for p in compiled.plan.workloads if p.name == name)


def test_8b_arithmetic(fleet):
    w = workload_doc(model=nim_model("8B", contextLength=8192, concurrency=8), secrets=NIM_SECRETS)
    s = plan_of(compile_single(fleet(workloads={"w.yaml": [w]}))).sizing
    assert s.weights == 19_200_000_000  # 8e9 x 2 B x 1.2
    assert s.kv_per_token == 2 * 32 * 8 * 128 * 2 == 131_072
    assert s.kv_cache == 131_072 * 8192 * 8 == 8 * GIB
    assert s.need == 19_200_000_000 + 8 * GIB
    assert s.count == 1


def test_70b_needs_four_80gb_gpus(fleet):
    w = workload_doc(model=nim_model("70B", contextLength=8192, concurrency=8), secrets=NIM_SECRETS)
    compiled = compile_single(fleet(workloads={"w.yaml": [w]}))
    plan = plan_of(compiled)
    assert plan.sizing.need == 168_000_000_000 + 327_680 * 8192 * 8
    assert plan.gpus == 4 and plan.tensor_parallelism == 4
    assert plan.min_memory == 45 * 2**30  # ceil(176.5 GiB / 4)
    cache = objects_of(compiled, "NIMCache")[0]
    assert cache["spec"]["source"]["ngc"]["model"]["tensorParallelism"] == "4"
    rct = objects_of(compiled, "ResourceClaimTemplate")[0]
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][-1]["cel"]["expression"] == \
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('45Gi')) >= 0"


def test_precision_changes_the_count(fleet):
    w = workload_doc(model=nim_model("70B", precision="fp8", contextLength=8192, concurrency=8), secrets=NIM_SECRETS)
    assert plan_of(compile_single(fleet(workloads={"w.yaml": [w]}))).gpus == 2  # 84e9 B + 20 GiB = 98 GiB


def test_sizing_uses_the_pools_that_can_serve_the_workload(fleet):
    # The L40S pool (45 GiB GPUs) cannot hold an 8B model with a long context on one GPU; the H100 pool can,
    # but the workload requires Ada Lovelace, so sizing must use the L40S only.
    model = nim_model("8B", contextLength=32768, concurrency=8)  # 17.9 GiB weights + 32 GiB KV cache
    ada = workload_doc("ada", model=model, secrets=NIM_SECRETS, gpu={"require": {"architecture": ["Ada Lovelace"]}})
    anywhere = workload_doc("anywhere", model=model, secrets=NIM_SECRETS)
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[H100, L40S])], workloads={"w.yaml": [ada, anywhere]}))
    assert plan_of(compiled, "anywhere").gpus == 1
    assert plan_of(compiled, "ada").gpus == 2
    assert any("too big for the largest GPU (45.0 GiB, pool l40s)" in step for step in plan_of(compiled, "ada").sizing.steps)


def test_share_group_members_are_sized_together(fleet):
    members = [workload_doc(n, model=nim_model(p, contextLength=4096, concurrency=4), secrets=NIM_SECRETS,
                            gpu={"sharing": "TimeSlicing", "shareGroup": "g"}) for n, p in (("a", "1B"), ("b", "8B"))]
    compiled = compile_single(fleet(workloads={"w.yaml": members}))
    a, b = plan_of(compiled, "a"), plan_of(compiled, "b")
    assert a.sizing.total_need == b.sizing.total_need == a.sizing.need + b.sizing.need
    assert a.min_memory == b.min_memory
    claim = objects_of(compiled, "ResourceClaim")[0]
    expr = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert f"quantity('{a.min_memory // 2**30}Gi')" in expr


def test_explicit_count_that_is_too_small_warns(fleet):
    w = workload_doc(model=nim_model("70B"), secrets=NIM_SECRETS, gpu={"count": 1})
    result = gpuc("validate", fleet(workloads={"w.yaml": [w]}))
    assert result.code == 0
    assert "warning: spec.gpu.count: the model needs" in result.err and "use count: auto" in result.err


def test_explain_shows_the_arithmetic():
    result = gpuc("explain", EXAMPLES, "nim-service/llama-70b")
    assert result.code == 0, result.err
    out = result.out
    assert "## cluster prod-east: Kubernetes 1.34 (resource.k8s.io/v1), DRA driver 25.12.0" in out
    assert "weights  = 70e9 x 2 B x 1.2 overhead = 156.5 GiB" in out
    assert "KV cache = 327,680 B x 8,192 tokens x 8 sequences = 20.0 GiB" in out
    assert "2 GPU(s): 88.2 GiB each -> too big for the largest GPU (79.6 GiB, pool h100)" in out
    assert "4 GPU(s): 44.1 GiB each -> fits pool h100" in out
    assert "=> 4 GPU(s) per replica" in out and 'tensorParallelism "4"' in out
    assert "- a100-mig: GPUs are in static MIG mode" in out
    assert "NIMService nim-service/llama-70b" in out


def test_explain_json_and_unknown_workload():
    data = json.loads(gpuc("explain", EXAMPLES, "llama-8b-chat", "--output", "json").out)
    assert data["clusters"][0]["gpusPerReplica"] == 1
    assert data["clusters"][0]["claim"]["kind"] == "ResourceClaimTemplate"
    result = gpuc("explain", EXAMPLES, "llama-9b")
    assert result.code == 2 and "no workload named 'llama-9b'" in result.err


def test_the_memory_floor_sizing_adds_always_matches_the_pool_it_sized_for(fleet):
    # 8B at fp32 with a 178k context: 35.8 GiB of weights + 43.5 GiB of KV = 79.2 GiB. That is below an
    # H100's 79.6 GiB, but a whole-GiB floor (80Gi) would match no H100: the floor is written in MiB instead
    # and the workload takes one GPU, whose selector the placement then really matches.
    w = workload_doc(model=nim_model("8B", precision="fp32", contextLength=178_000, concurrency=1), secrets=NIM_SECRETS)
    path = fleet(workloads={"w.yaml": [w]})
    plan = plan_of(compile_single(path))
    assert 79 * GIB < plan.sizing.need < 79.6 * GIB
    assert plan.gpus == 1 and plan.sizing.need <= plan.min_memory < 80 * GIB and plan.min_memory % 2**20 == 0
    assert gpuc("render", path, "-o", path / "out").code == 0  # the plan places it: the selector matches H100s
    rendered = "".join(p.read_text() for p in (path / "out").rglob("*.yaml"))
    assert f"{plan.min_memory // 2**20}Mi" in rendered


def test_multi_node_replicas_spread_the_model_over_every_node(fleet):
    """405B at fp8 over 2 nodes: 4 GPUs (2 per node) of 186 GB each hold it; one node's GPUs alone would not."""
    gb200 = {"name": "gb200", "nodes": 4, "gpu": {"model": "GB200-186GB", "count": 4}}
    w = workload_doc("big", model=nim_model("405B", precision="fp8", contextLength=8192, concurrency=8),
                     secrets=NIM_SECRETS, gpu={"count": "auto", "multiNode": {"nodes": 2}})
    path = fleet(clusters=[cluster_doc(pools=[gb200])], workloads={"w.yaml": [w]})
    compiled = compile_single(path)
    s = plan_of(compiled, "big").sizing
    assert (s.count, s.nodes, s.gpus_per_replica) == (2, 2, 4)
    assert s.per_gpu == -(-s.need // 4)
    assert s.steps[0].startswith("1 GPU(s) x 2 nodes: ")
    service = objects_of(compiled, "NIMService")[0]
    assert service["spec"]["multiNode"]["parallelism"] == {"tensor": 2, "pipeline": 2}
    cache = objects_of(compiled, "NIMCache")[0]
    assert cache["spec"]["source"]["ngc"]["model"]["tensorParallelism"] == "2"
    rct = next(o for o in objects_of(compiled, "ResourceClaimTemplate") if o["metadata"]["name"].startswith("big-gpu"))
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    out = gpuc("explain", path, "big").out
    assert "=> 2 GPU(s) per node x 2 nodes = 4 per replica" in out and "pipeline parallelism 2" in out


def test_a_mig_mix_too_small_for_the_model_warns(fleet):
    a100 = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}
    big = workload_doc("big", model=nim_model("70B"), secrets=NIM_SECRETS, gpu={"mig": {"slices": [{"profile": "3g.40gb"}]}})
    small = workload_doc("small", model=nim_model("1B", contextLength=4096, concurrency=1), secrets=NIM_SECRETS,
                         gpu={"mig": {"slices": [{"profile": "3g.40gb"}]}})
    path = fleet(clusters=[cluster_doc(pools=[a100])], workloads={"w.yaml": [big, small]})
    result = gpuc("validate", path)
    assert "spec.gpu.mig.slices: the model needs 159.0 GiB, but these MIG slices hold 39.5 GiB" in result.err, result.err
    assert result.err.count("these MIG slices hold") == 1  # the 1B model fits its slice


def test_explain_refuses_a_name_two_namespaces_use(fleet):
    path = fleet(workloads={"w.yaml": [workload_doc("notebooks", "research"), workload_doc("notebooks", "team")]})
    result = gpuc("explain", path, "notebooks")
    assert result.code == 2
    assert "'notebooks' names 2 workloads" in result.err and "name one as namespace/name: research/notebooks, team/notebooks" in result.err
    assert gpuc("explain", path, "team/notebooks").code == 0


def test_a_share_group_is_sized_for_every_model_on_its_gpus(fleet):
    """Two 8B models time-slicing the same GPUs need 2 x 25.9 GiB: more than one 48 GB L40S, so 2 GPUs each
    (alone, one fits)."""
    shared = {"count": "auto", "sharing": "TimeSlicing", "shareGroup": "g"}
    ws = [workload_doc(n, model=nim_model("8B", contextLength=8192, concurrency=8), secrets=NIM_SECRETS, gpu=shared) for n in ("a", "b")]
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=[L40S])], workloads={"w.yaml": ws}))
    for name in ("a", "b"):
        sizing = plan_of(compiled, name).sizing
        assert sizing.total_need == 2 * sizing.need and sizing.count == 2, (name, sizing.steps)
    alone = workload_doc("a", model=nim_model("8B", contextLength=8192, concurrency=8), secrets=NIM_SECRETS, gpu={"count": "auto"})
    assert plan_of(compile_single(fleet(clusters=[cluster_doc(pools=[L40S])], workloads={"w.yaml": [alone]})), "a").sizing.count == 1


def test_a_count_is_not_fitted_on_a_pool_with_fewer_gpus_per_node(fleet):
    """70B (176.5 GiB) would fit 2 H200s (88.2 GiB each), but the H200 nodes hold one GPU each and a pod's claim is
    allocated on one node: sizing passes them over at 2 and settles on 4 H100s of one node."""
    h200 = {"name": "h200", "nodes": 2, "gpu": {"model": "H200-141GB", "count": 1}}
    w = workload_doc(model=nim_model("70B", contextLength=8192, concurrency=8), secrets=NIM_SECRETS)
    plan = plan_of(compile_single(fleet(clusters=[cluster_doc(pools=[h200, H100])], workloads={"w.yaml": [w]})))
    assert plan.gpus == 4 and plan.min_memory == 45 * GIB, plan.sizing.steps
    assert plan.sizing.steps[1] == "2 GPU(s): 88.2 GiB each -> no pool has that many GPUs per node"
