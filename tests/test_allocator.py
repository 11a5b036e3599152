"""The offline allocator, rule by rule, on small hand-built inventories (Kubernetes 1.34 structured semantics)."""

from __future__ import annotations

import random

import pytest

from compiler.cel import Quantity
from compiler.load.yaml_source import SourceDoc
from compiler.place import place_cluster, synthesize_for
from compiler.place.allocator import (
    DeviceClass,
    Pod,
    PodClaim,
    parse_claim_spec,
    placement_order,
)
from compiler.place.allocator.candidates import DeviceIndex
from compiler.place.allocator.features import AllocatorFeatures
from compiler.place.allocator.planner import Planner
from compiler.place.allocator.search import allocate_on_node
from compiler.place.allocator.state import AllocationState, ClaimResult, DeviceResult
from compiler.place.inventory import Device, NodeInfo, ResourceSlice, build_inventory
from compiler.place.inventory.codec import counter_use

from conftest import cluster_doc, compile_single, workload_doc

GPU = "gpu.nvidia.com"
CLASSES = {
    "gpu": DeviceClass("gpu", ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",)),
    "mig": DeviceClass("mig", ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",)),
}
ORIGIN = SourceDoc("workloads/test.yaml", 0, {})


def dev(name: str, type: str = "gpu", consumes=(), **attrs) -> Device:
    return Device(name, GPU, {GPU: {"type": type, **attrs}}, {GPU: {"memory": Quantity.parse("80Gi")}}, tuple(consumes))


def inventory(nodes: dict[str, list[Device]], counters: dict[str, dict[str, dict[str, int]]] | None = None):
    slices = []
    for node, devices in nodes.items():
        shared = {name: {c: Quantity(v) for c, v in values.items()} for name, values in (counters or {}).get(node, {}).items()}
        slices.append(ResourceSlice(f"{node}-gpu", GPU, node, 1, 1, devices, node_name=node, shared_counters=shared))
    return build_inventory("test", "synthesized", "resource.k8s.io/v1", slices, [NodeInfo(n, "pool") for n in nodes])


def request(name: str, device_class: str = "gpu", count: int = 1, selectors=(), **extra) -> dict:
    body = {"deviceClassName": device_class, "count": count, **extra}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if body.get("allocationMode") == "All":
        del body["count"]
    return {"name": name, "exactly": body}


def claim(key: str, requests: list[dict], constraints: list[dict] | None = None, shared: bool = False) -> PodClaim:
    spec = parse_claim_spec({"devices": {"requests": requests, "constraints": constraints or []}})
    return PodClaim(key, "gpu", f"test {key}", spec, shared)


def pod(name: str, *claims: PodClaim) -> Pod:
    return Pod(f"team/{name.rsplit('-', 1)[0]}", name, 0, 0, tuple(claims), ORIGIN)


def attr(name: str) -> str:
    return f"device.attributes['gpu.nvidia.com'].{name}"


def devices_of(outcome) -> list[tuple[str, str]]:
    return [(d.request, d.device) for c in outcome.claims for d in c.devices]


# ------------------------------------------------------------------------------------ search rules

def test_backtracking_gives_an_earlier_request_another_device():
    inv = inventory({"n1": [dev("gpu-0", model="A"), dev("gpu-1", model="B")]})
    p = pod("w-0", claim("team/w-0-gpu", [request("any"), request("a-only", selectors=[f"{attr('model')} == 'A'"])]))
    outcome = Planner(inv, CLASSES).place(p)
    # 'any' first takes gpu-0, then 'a-only' finds nothing; the search goes back and gives 'any' gpu-1.
    assert devices_of(outcome) == [("any", "gpu-1"), ("a-only", "gpu-0")]


def test_match_attribute_rejects_the_first_choice_and_finds_a_common_parent():
    inv = inventory({"n1": [dev("mig-a", "mig", parentUUID="GPU-1", profile="1g"),
                            dev("mig-b", "mig", parentUUID="GPU-2", profile="3g"),
                            dev("mig-c", "mig", parentUUID="GPU-2", profile="1g")]})
    p = pod("w-0", claim("team/w-0-gpu",
                         [request("small", "mig", selectors=[f"{attr('profile')} == '1g'"]),
                          request("large", "mig", selectors=[f"{attr('profile')} == '3g'"])],
                         [{"requests": ["small", "large"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]))
    outcome = Planner(inv, CLASSES).place(p)
    assert devices_of(outcome) == [("small", "mig-c"), ("large", "mig-b")]


def test_match_attribute_requires_the_attribute_and_its_type():
    inv = inventory({"n1": [dev("gpu-0", group=1), dev("gpu-1", group=True), dev("gpu-2"), dev("gpu-3", group=1)]})
    p = pod("w-0", claim("team/w-0-gpu", [request("gpu", count=2)], [{"matchAttribute": "gpu.nvidia.com/group"}]))
    assert devices_of(Planner(inv, CLASSES).place(p)) == [("gpu", "gpu-0"), ("gpu", "gpu-3")]  # true is not 1; no attribute, no match


def test_all_mode_skips_a_node_with_one_matching_device_in_use():
    inv = inventory({"n1": [dev("gpu-0"), dev("gpu-1")], "n2": [dev("gpu-0"), dev("gpu-1")]})
    planner = Planner(inv, CLASSES)
    first = planner.place(pod("one-0", claim("team/one-0-gpu", [request("gpu")])))
    assert first.node == "n1" and devices_of(first) == [("gpu", "gpu-0")]
    everything = planner.place(pod("all-0", claim("team/all-0-gpu", [request("gpu", allocationMode="All")])))
    assert everything.node == "n2" and devices_of(everything) == [("gpu", "gpu-0"), ("gpu", "gpu-1")]
    again = planner.place(pod("all-1", claim("team/all-1-gpu", [request("gpu", allocationMode="All")])))
    assert not again.placed and "asks for all matching devices of a node" in again.reason


def test_all_mode_refuses_an_incomplete_pool_with_an_error():
    slices = [ResourceSlice("n1-a", GPU, "n1", 1, 2, [dev("gpu-0")], node_name="n1")]  # 1 of 2 slices published
    inv = build_inventory("test", "synthesized", "resource.k8s.io/v1", slices, [NodeInfo("n1", "pool")])
    planner = Planner(inv, CLASSES, features=AllocatorFeatures.for_minor(34))  # 1.35 on skips incomplete pools
    outcome = planner.place(pod("all-0", claim("team/all-0-gpu", [request("gpu", allocationMode="All")])))
    assert outcome.error and "resource pool gpu.nvidia.com/n1 is incomplete (1 of 2 slices)" in outcome.reason
    assert planner.place(pod("one-0", claim("team/one-0-gpu", [request("gpu")]))).node == "n1"  # ExactCount may use it (to 1.34)


def test_first_available_falls_back_in_order():
    inv = inventory({"n1": [dev("gpu-0", size="small"), dev("gpu-1", size="large")]})
    spec = {"name": "gpu", "firstAvailable": [
        {"name": "two-large", "deviceClassName": "gpu", "count": 2, "selectors": [{"cel": {"expression": f"{attr('size')} == 'large'"}}]},
        {"name": "one-large", "deviceClassName": "gpu", "count": 1, "selectors": [{"cel": {"expression": f"{attr('size')} == 'large'"}}]},
        {"name": "any", "deviceClassName": "gpu", "count": 1}]}
    outcome = Planner(inv, CLASSES).place(pod("w-0", PodClaim("team/w-0-gpu", "gpu", "test", parse_claim_spec({"devices": {"requests": [spec]}}), False)))
    assert devices_of(outcome) == [("gpu/one-large", "gpu-1")]


def test_devices_already_allocated_are_unavailable_and_admin_access_ignores_them():
    inv = inventory({"n1": [dev("gpu-0")]})
    planner = Planner(inv, CLASSES)
    assert planner.place(pod("a-0", claim("team/a-0-gpu", [request("gpu")]))).node == "n1"
    assert not planner.place(pod("b-0", claim("team/b-0-gpu", [request("gpu")]))).placed
    monitor = planner.place(pod("mon-0", claim("team/mon-0-gpu", [request("gpu", adminAccess=True)])))
    assert devices_of(monitor) == [("gpu", "gpu-0")] and monitor.claims[0].devices[0].admin
    assert planner.place(pod("mon-1", claim("team/mon-1-gpu", [request("gpu", adminAccess=True)]))).placed  # admin does not allocate


def test_shared_claim_pins_every_consumer_to_its_node():
    inv = inventory({"n1": [dev("gpu-0")], "n2": [dev("gpu-0"), dev("gpu-1")]})
    shared = claim("team/shared", [request("gpu")], shared=True)
    planner = Planner(inv, CLASSES)
    # The first consumer also needs its own GPU: both fit only on n2, so the shared claim is allocated there.
    first = planner.place(pod("big-0", shared, claim("team/big-0-gpu", [request("gpu")])))
    assert first.node == "n2" and devices_of(first) == [("gpu", "gpu-0"), ("gpu", "gpu-1")]
    # n1 has a free GPU, but the second consumer must follow the claim to n2 and gets the same device.
    second = planner.place(pod("small-0", shared))
    assert second.node == "n2" and devices_of(second) == [("gpu", "gpu-0")] and second.claims[0].shared
    third = planner.place(pod("other-0", shared, claim("team/other-0-gpu", [request("gpu")])))
    assert not third.placed and third.reason.startswith("it must run on node n2, where its shared claim is allocated")


def test_shared_counters_limit_partitionable_devices():
    use = lambda n: (counter_use("gpu-0-counters", {"slices": Quantity(n)}),)
    inv = inventory({"n1": [dev("gpu-0", consumes=use(2)), dev("mig-0", "mig", consumes=use(1), profile="1g"),
                            dev("mig-1", "mig", consumes=use(1), profile="1g")]},
                    counters={"n1": {"gpu-0-counters": {"slices": 2}}})
    planner = Planner(inv, CLASSES)
    assert devices_of(planner.place(pod("m-0", claim("team/m-0-gpu", [request("m", "mig")])))) == [("m", "mig-0")]
    full = planner.place(pod("f-0", claim("team/f-0-gpu", [request("g")])))
    assert not full.placed and "shared counters" in full.reason  # the whole GPU needs both slices, one is used
    assert devices_of(planner.place(pod("m-1", claim("team/m-1-gpu", [request("m", "mig")])))) == [("m", "mig-1")]


def test_counters_are_checked_within_one_search():
    use = (counter_use("c", {"n": Quantity(1)}),)
    inv = inventory({"n1": [dev("gpu-0", consumes=use), dev("gpu-1", consumes=use)]}, counters={"n1": {"c": {"n": 1}}})
    state = AllocationState(inv)
    index = DeviceIndex(inv, CLASSES)
    assert allocate_on_node("n1", [claim("team/x", [request("gpu", count=2)])], index, state) is None
    assert allocate_on_node("n1", [claim("team/x", [request("gpu")])], index, state) is not None


def test_counter_sets_resolve_across_the_pool_as_1_35_publishes_them():
    use = (counter_use("gpu-0-counter-set", {"slices": Quantity(1)}),)
    slices = [ResourceSlice("n1-gpu-0", GPU, "n1", 1, 2, [dev("mig-0", "mig", consumes=use), dev("mig-1", "mig", consumes=use)],
                            node_name="n1"),
              ResourceSlice("n1-counters-0", GPU, "n1", 1, 2, [], node_name="n1",
                            shared_counters={"gpu-0-counter-set": {"slices": Quantity(1)}})]
    inv = build_inventory("test", "synthesized", "resource.k8s.io/v1", slices, [NodeInfo("n1", "pool")])
    planner = Planner(inv, CLASSES)
    assert devices_of(planner.place(pod("m-0", claim("team/m-0-gpu", [request("m", "mig")])))) == [("m", "mig-0")]
    assert not planner.place(pod("m-1", claim("team/m-1-gpu", [request("m", "mig")]))).placed  # the pool's set is used up


def test_admin_access_does_not_bypass_shared_counters():
    use = lambda n: (counter_use("gpu-0-counters", {"slices": Quantity(n)}),)
    inv = inventory({"n1": [dev("gpu-0", consumes=use(2)), dev("mig-0", "mig", consumes=use(1), profile="1g")]},
                    counters={"n1": {"gpu-0-counters": {"slices": 2}}})
    planner = Planner(inv, CLASSES)
    assert planner.place(pod("m-0", claim("team/m-0-gpu", [request("m", "mig")]))).placed
    # Admin access ignores other allocations of gpu-0 itself, not the counters the MIG device holds.
    admin = planner.place(pod("a-0", claim("team/a-0-gpu", [request("g", adminAccess=True)])))
    assert not admin.placed
    state, index = AllocationState(inv), DeviceIndex(inv, CLASSES)
    two_admins = claim("team/x", [request("g", adminAccess=True), request("m", "mig", adminAccess=True)])
    assert allocate_on_node("n1", [two_admins], index, state) is None  # together they need 3 of 2 slices


def test_counters_check_every_counter_of_the_pool_not_only_the_device_s_own():
    inv = inventory({"n1": [dev("a-0", consumes=(counter_use("cs", {"a": Quantity(3)}),)),
                            dev("b-0", consumes=(counter_use("cs", {"b": Quantity(1)}),))]},
                    counters={"n1": {"cs": {"a": 2, "b": 1}}})
    state, index = AllocationState(inv), DeviceIndex(inv, CLASSES)
    # An allocation already overdraws counter a (as after the driver republished a smaller set): like
    # checkAvailableCounters, which compares every counter of the pool, nothing consuming counters fits.
    state.commit([ClaimResult(claim("team/old", [request("gpu")]), "n1", (DeviceResult("gpu", 0),))])
    b_only = claim("team/x", [request("gpu", selectors=["device.attributes['gpu.nvidia.com'].type == 'gpu'"])])
    assert allocate_on_node("n1", [b_only], index, state) is None


def test_an_invalid_pool_fails_exact_count_when_the_search_reaches_it():
    slices = [ResourceSlice("n1-a", GPU, "n1", 1, 2, [dev("gpu-0")], node_name="n1"),
              ResourceSlice("n1-b", GPU, "n1", 1, 2, [dev("gpu-0")], node_name="n1")]
    inv = build_inventory("test", "synthesized", "resource.k8s.io/v1", slices, [NodeInfo("n1", "pool")])
    outcome = Planner(inv, CLASSES, features=AllocatorFeatures.for_minor(34)).place(pod("w-0", claim("team/w-0-gpu", [request("gpu", count=2)])))
    assert not outcome.placed and outcome.error  # never the same device twice in one claim (1.34: fatal when reached)
    assert "resource pool gpu.nvidia.com/n1, which is invalid: device 'gpu-0' is published in more than one" in outcome.reason
    assert "the driver must publish each device once" in outcome.reason


def test_cel_errors_abort_the_pod_like_the_scheduler():
    inv = inventory({"n1": [dev("gpu-0")]})
    outcome = Planner(inv, CLASSES).place(pod("w-0", claim("team/w-0-gpu", [request("gpu", selectors=[f"{attr('index')} == 0"])])))
    assert outcome.error and not outcome.placed
    assert "failed on device gpu.nvidia.com/n1/gpu-0: no such key: 'index'" in outcome.reason


def test_missing_device_class_is_an_error():
    inv = inventory({"n1": [dev("gpu-0")]})
    outcome = Planner(inv, CLASSES).place(pod("w-0", claim("team/w-0-gpu", [request("gpu", device_class="gpu.example.com")])))
    assert outcome.error and "DeviceClass 'gpu.example.com' does not exist" in outcome.reason


def test_all_of_a_pods_claims_land_on_one_node():
    inv = inventory({"n1": [dev("gpu-0")], "n2": [dev("gpu-0"), dev("gpu-1")]})
    outcome = Planner(inv, CLASSES).place(pod("w-0", claim("team/w-0-a", [request("gpu")]), claim("team/w-0-b", [request("gpu")])))
    assert outcome.node == "n2" and {c.claim for c in outcome.claims} == {"team/w-0-a", "team/w-0-b"}


def test_claim_limits_are_enforced():
    with pytest.raises(Exception, match="more than the limit of 32 per claim"):
        parse_claim_spec({"devices": {"requests": [request("gpu", count=33)]}})
    with pytest.raises(Exception, match="DRAConsumableCapacity"):
        parse_claim_spec({"devices": {"requests": [request("gpu")], "constraints": [{"distinctAttribute": "gpu.nvidia.com/uuid"}]}},
                         AllocatorFeatures.for_minor(34))


def test_derived_attributes_need_their_gate_and_a_qualified_name():
    derived = {"name": "derived/numa", "expression": "device.attributes['gpu.nvidia.com'].numa"}
    spec = {"devices": {"requests": [request("gpu", derivedAttributes=[derived])]}}
    with pytest.raises(Exception, match=r"derivedAttributes: has derived attributes, but the DRADerivedAttributes feature is disabled"):
        parse_claim_spec(spec, AllocatorFeatures.for_minor(37))  # alpha in 1.37: off by default
    on = AllocatorFeatures.of(["DRADerivedAttributes"])
    assert parse_claim_spec(spec, on).requests[0].options[0].derived == (("derived/numa", derived["expression"]),)
    with pytest.raises(Exception, match=r"derivedAttributes\[0\].name must be a fully qualified attribute name"):
        parse_claim_spec({"devices": {"requests": [request("gpu", derivedAttributes=[{**derived, "name": "numa"}])]}}, on)


def test_v1beta1_claims_parse_like_v1():
    flat = {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu", "count": 2}]}}
    nested = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}
    assert parse_claim_spec(flat) == parse_claim_spec(nested)


# --------------------------------------------------------------------------------- planner order

def test_cursor_skipping_gives_the_same_placements_as_trying_every_node():
    rng = random.Random(7)
    nodes = {f"n{i}": [dev(f"gpu-{j}", model=rng.choice("AB")) for j in range(rng.randint(1, 4))] for i in range(12)}
    pods = [pod(f"w{k % 5}-{k}", claim(f"team/w{k % 5}-{k}", [request("gpu", count=1 + k % 5 % 3,
                                                                  selectors=[f"{attr('model')} == '{'AB'[k % 2]}'"])]))
            for k in range(40)]
    fast = Planner(inventory(nodes), CLASSES)
    fast_out = [fast.place(p) for p in pods]
    slow_inv = inventory(nodes)
    state, index = AllocationState(slow_inv), DeviceIndex(slow_inv, CLASSES)
    slow_out = []
    for p in pods:
        for node in [n.name for n in slow_inv.nodes]:
            results = allocate_on_node(node, list(p.claims), index, state)
            if results:
                state.commit(results)
                slow_out.append((node, sorted(slow_inv.devices[d.device].name for r in results for d in r.devices)))
                break
        else:
            slow_out.append((None, []))
    assert [(o.node, sorted(d for _, d in devices_of(o))) for o in fast_out] == slow_out
    assert any(n is None for n, _ in slow_out) and any(n for n, _ in slow_out)


def test_placement_order_puts_large_and_constrained_pods_first():
    small = pod("s-0", claim("team/s-0", [request("gpu")]))
    large = pod("l-0", claim("team/l-0", [request("gpu", count=4)]))
    mix = pod("m-0", claim("team/m-0", [request("a", "mig"), request("b", "mig", count=3)], [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]))
    assert placement_order([small, large, mix]) == [2, 1, 0]


def test_mig_mix_fits_when_the_helpers_slices_go_elsewhere(fleet):
    """b-notebook needs 3g.40gb + 2x 1g.10gb on one GPU; only the mixed pool's GPU has that. a-helper's single
    1g.10gb would take one of those two 1g.10gb slices if it were placed first; it must go to the other pool."""
    pools = [{"name": "mixed", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 1},
              "mig": {"layout": [{"profile": "3g.40gb", "count": 1}, {"profile": "1g.10gb", "count": 2}]}},
             {"name": "small", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 1}, "mig": {"layout": "all-1g.10gb"}}]
    workloads = {"w.yaml": [workload_doc("a-helper", gpu={"mig": {"slices": [{"profile": "1g.10gb"}]}}),
                            workload_doc("b-notebook", gpu={"mig": {"sameGpu": True, "slices": [
                                {"profile": "3g.40gb", "count": 1}, {"profile": "1g.10gb", "count": 2}]}})]}
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads))
    plan = place_cluster(compiled, synthesize_for(compiled))
    where = {p.workload: (p.node, [d.device for c in p.claims for d in c.devices]) for p in plan.pods}
    assert plan.feasible
    assert where["team/b-notebook"] == ("mixed-0", ["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-1g10gb-19-4", "gpu-0-mig-1g10gb-19-5"])
    assert where["team/a-helper"][0] == "small-0"


def test_mig_mix_without_room_says_which_profiles_are_missing(fleet):
    pools = [{"name": "mixed", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 2},
              "mig": {"layout": [{"profile": "3g.40gb", "count": 1}, {"profile": "1g.10gb", "count": 2}]}}]
    mix = {"mig": {"sameGpu": True, "slices": [{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]}}
    workloads = {"w.yaml": [workload_doc("notebook", replicas=2, gpu=mix),
                            workload_doc("helper", replicas=2, gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": 2}], "sameGpu": False}})]}
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads))
    plan = place_cluster(compiled, synthesize_for(compiled))
    reasons = {p.pod: p.reason for p in plan.unplaced}
    # Both notebooks take a GPU each; the helpers then find every 1g.10gb allocated.
    assert set(reasons) == {"helper-0", "helper-1"}
    assert reasons["helper-0"].startswith("request 'mig-1g-10gb' of helper needs 2 free devices on one node: 4 match, 4 are allocated")


def test_mig_mix_message_names_the_mix(fleet):
    layout = [{"profile": "3g.40gb", "count": 1}, {"profile": "1g.10gb", "count": 2}]
    pools = [{"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 2}, "mig": {"layout": layout}}]
    pair = {"mig": {"sameGpu": True, "slices": [{"profile": "3g.40gb"}, {"profile": "1g.10gb"}]}}
    workloads = {"w.yaml": [workload_doc("a-pair", gpu=pair),
                            workload_doc("b-ones", gpu={"mig": {"sameGpu": True, "slices": [{"profile": "1g.10gb", "count": 2}]}}),
                            workload_doc("z-probe", gpu=pair)]}
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads))
    plan = place_cluster(compiled, synthesize_for(compiled))
    # a-pair takes GPU 0's 3g.40gb and a 1g.10gb; b-ones needs two 1g.10gb on one GPU and takes GPU 1's.
    # z-probe then sees a free 3g.40gb (GPU 1) and a free 1g.10gb (GPU 0), never on the same GPU.
    (failed,) = plan.unplaced
    assert failed.pod == "z-probe-0"
    assert failed.reason == ("MIG mix of z-probe needs 3g.40gb + 1g.10gb on one GPU: no GPU has all of them free "
                             "(closest: one on a100-0 lacks 1g.10gb)")
    assert failed.diagnostic("c1").render().startswith("workloads/w.yaml:")


def test_each_unplaceable_pod_is_explained_in_its_own_workloads_name(fleet):
    pools = [{"name": "l4", "nodes": 1, "gpu": {"model": "L4-24GB", "count": 1}}]
    shared = {"count": 1, "sharing": "TimeSlicing", "shareGroup": "g"}
    workloads = {"w.yaml": [workload_doc("a-filler", gpu={"count": 1}), workload_doc("b-one", gpu=shared),
                            workload_doc("c-two", gpu=shared)]}
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads))
    plan = place_cluster(compiled, synthesize_for(compiled))
    assert [p.pod for p in plan.unplaced] == ["b-one-0", "c-two-0"]
    assert [p.reason.split(" needs")[0] for p in plan.unplaced] == ["request 'gpu' of b-one", "request 'gpu' of c-two"]


def test_the_claim_parser_refuses_a_request_with_both_exactly_and_first_available():
    from compiler.place.allocator.requests import ClaimError
    body = {"deviceClassName": "gpu", "count": 1}
    with pytest.raises(ClaimError, match=r"requests\[0\] has both an exact request and firstAvailable"):
        parse_claim_spec({"devices": {"requests": [{"name": "gpu", "exactly": body, "firstAvailable": [dict(body, name="a")]}]}})


def test_two_requests_of_one_class_sharing_a_match_attribute_get_a_specific_reason():
    inv = inventory({"n1": [dev("gpu-0", grp=1), dev("gpu-1", grp=2)]})
    p = pod("w-0", claim("team/w-0", [request("a"), request("b")], [{"matchAttribute": "gpu.nvidia.com/grp"}]))
    outcome = Planner(inv, CLASSES).place(p)
    assert not outcome.placed
    assert outcome.reason == ("requests 'a' + 'b' of w must share gpu.nvidia.com/grp: no value of it has 2 free devices "
                              "on one node (closest: n1 has 1 free device with gpu.nvidia.com/grp = 1, 2 needed)")


def test_one_allocated_device_is_worded_in_the_singular():
    planner = Planner(inventory({"n1": [dev("gpu-0")]}), CLASSES)
    assert planner.place(pod("one-0", claim("team/one-0", [request("gpu")]))).placed
    outcome = planner.place(pod("two-0", claim("team/two-0", [request("gpu")])))
    assert "1 match, 1 is allocated (1 by earlier pods of team/one), at most 0 free on one node" in outcome.reason


def test_the_render_gate_places_every_pod_where_the_full_plan_does(fleet):
    """render and validate plan without recording devices (detail=False): the same pods must land on the
    same nodes, and the unplaceable ones get the same reasons."""
    from compiler.pipeline import compile_fleet

    from conftest import EXAMPLES

    big = workload_doc("big", replicas=40, gpu={"count": 8})
    small = [workload_doc(f"s{i}", replicas=3, gpu={"count": 1 + i % 3}) for i in range(6)]
    mig = workload_doc("m", replicas=5, gpu={"mig": {"slices": [{"profile": "3g.40gb"}]}})
    pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}]
    path = fleet(clusters=[cluster_doc(pools=pools)], workloads={"w.yaml": [big, mig, *small]})
    compiled = [compile_single(path), *compile_fleet(EXAMPLES).compiled.values()]
    unplaced = 0
    for c in compiled:
        inventory = synthesize_for(c)
        full, gate = place_cluster(c, inventory), place_cluster(c, inventory, detail=False)
        assert [(p.pod, p.node) for p in gate.pods] == [(p.pod, p.node) for p in full.pods]
        assert gate.diagnostics() == full.diagnostics()
        assert all(not p.claims for p in gate.pods) and not gate.pools and full.pools
        unplaced += len(full.unplaced)
    assert unplaced  # the first fleet does not fit, so reasons were compared too


def test_a_device_in_two_nodes_views_of_a_moving_pool_is_allocated_once():
    """While a pool moves, n1 still sees its complete older generation and n2 the newer one: the same device
    (driver, pool, name) in both. The scheduler's allocated state is by device ID, so once one copy is taken
    the other is in use too."""
    slices = [ResourceSlice("old", GPU, "mover", 1, 1, [dev("gpu-0")], node_name="n1"),
              ResourceSlice("new", GPU, "mover", 2, 1, [dev("gpu-0")], node_name="n2")]
    inv = build_inventory("test", "synthesized", "resource.k8s.io/v1", slices, [NodeInfo("n1", "pool"), NodeInfo("n2", "pool")])
    planner = Planner(inv, CLASSES)
    first = planner.place(pod("w-0", claim("team/w-0-gpu", [request("gpu")])))
    assert first.node == "n1" and devices_of(first) == [("gpu", "gpu-0")]
    second = planner.place(pod("w-1", claim("team/w-1-gpu", [request("gpu")])))
    assert not second.placed
