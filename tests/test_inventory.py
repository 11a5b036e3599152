"""Synthesized inventory: what the NVIDIA DRA driver of each version publishes for a cluster's pools."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from compiler.facts import load_table
from compiler.facts.catalog import gpu_models
from compiler.facts.driver import builtin_classes, driver_lines
from compiler.place import synthesize_for
from compiler.place.inventory.codec import inventory_list
from compiler.place.inventory.synth import _VALUES, partition_ids

from conftest import REFERENCE, cluster_doc, compile_single, workload_doc

GPU = "gpu.nvidia.com"


def inventory(fleet, driver="25.12.0", kubernetes="1.34", pools=None, workloads=None, **spec):
    path = fleet(clusters=[cluster_doc(driver=driver, kubernetes=kubernetes, pools=pools, **spec)], workloads=workloads or {})
    return synthesize_for(compile_single(path))


def gpu_devices(inv):
    return [d for d in inv.devices if d.driver == GPU]


def h100_pool(**extra):
    return {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, **extra}


def a100_mig_pool(layout="all-balanced", **extra):
    return {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 2}, "mig": {"layout": layout}, **extra}


@pytest.mark.parametrize("driver, present, absent", [
    ("25.3.2", {"index", "minor", "pcieBusID"}, {"resource.kubernetes.io/pciBusID", "addressingMode"}),
    ("25.8.1", {"pcieBusID"}, {"index", "minor", "resource.kubernetes.io/pciBusID", "addressingMode"}),
    ("25.12.0", {"resource.kubernetes.io/pciBusID", "addressingMode"}, {"index", "minor", "pcieBusID", "resource.kubernetes.io/numaNode"}),
    ("0.5.0-dev", {"resource.kubernetes.io/pciBusID", "resource.kubernetes.io/numaNode"}, {"pcieBusID", "index"}),
])
def test_full_gpu_attribute_names_follow_the_driver_version(fleet, driver, present, absent):
    inv = inventory(fleet, driver=driver, pools=[h100_pool(host={"addressingMode": "HMM", "numaNodes": 2})])
    device = gpu_devices(inv)[0]
    names = {n if d == GPU else f"{d}/{n}" for d, values in device.attributes.items() for n in values}
    assert present <= names
    assert not absent & names
    assert {"type", "uuid", "productName", "brand", "architecture", "cudaComputeCapability", "driverVersion",
            "cudaDriverVersion", "resource.kubernetes.io/pcieRoot"} <= names
    assert device.attributes[GPU]["productName"] == "NVIDIA H100 80GB HBM3"
    assert str(device.attributes[GPU]["cudaComputeCapability"]) == "9.0.0"
    assert str(device.capacity[GPU]["memory"]) == "81559Mi"


def test_one_slice_per_node_pool_named_after_the_node(fleet):
    inv = inventory(fleet, pools=[h100_pool(nodeNames=["gpu-a", "gpu-b"]),
                                  {"name": "l4", "nodes": 2, "gpu": {"model": "L4-24GB", "count": 1}}])
    gpu_slices = [s for s in inv.slices if s.driver == GPU]
    assert [(s.node_name, s.pool, s.slice_count, len(s.devices)) for s in gpu_slices] == [
        ("gpu-a", "gpu-a", 1, 8), ("gpu-b", "gpu-b", 1, 8), ("l4-0", "l4-0", 1, 1), ("l4-1", "l4-1", 1, 1)]
    assert [d.name for d in gpu_slices[0].devices] == [f"gpu-{i}" for i in range(8)]
    assert [n.name for n in inv.nodes] == ["gpu-a", "gpu-b", "l4-0", "l4-1"]


def test_device_plugin_pools_publish_nothing(fleet):
    inv = inventory(fleet, pools=[h100_pool(), {"name": "legacy", "nodes": 3, "gpu": {"model": "L40S-48GB", "count": 4},
                                                "allocation": "devicePlugin"}])
    assert {s.node_name for s in inv.slices} == {"h100-0", "h100-1"}


@pytest.mark.parametrize("driver, name", [("25.8.1", "gpu-0-mig-9-4-4"), ("25.12.0", "gpu-0-mig-3g40gb-9-4")])
def test_static_mig_devices_replace_the_full_gpu(fleet, driver, name):
    inv = inventory(fleet, driver=driver, pools=[a100_mig_pool()])
    devices = gpu_devices(inv)
    assert all(d.attributes[GPU]["type"] == "mig" for d in devices), "a GPU in MIG mode is not announced as a full GPU"
    assert len(devices) == 2 * 4  # all-balanced A100-80GB: 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb per GPU
    three_g = next(d for d in devices if d.attributes[GPU]["profile"] == "3g.40gb")
    assert three_g.name == name
    assert {k: str(v) for k, v in three_g.capacity[GPU].items()} == {
        "multiprocessors": "42", "copyEngines": "3", "decoders": "2", "encoders": "0", "jpegEngines": "0", "ofaEngines": "0",
        "memory": "40448Mi", "memorySlice4": "1", "memorySlice5": "1", "memorySlice6": "1", "memorySlice7": "1"}
    parents = {d.attributes[GPU]["parentUUID"] for d in devices}
    assert len(parents) == 2 and all(p.startswith("GPU-") for p in parents)
    assert all(d.attributes[GPU]["uuid"].startswith("MIG-") for d in devices)


def test_static_mig_names_of_the_25_3_line_carry_indices(fleet):
    inv = inventory(fleet, driver="25.3.2", pools=[a100_mig_pool([{"profile": "1g.10gb", "count": 7}])])
    devices = gpu_devices(inv)
    assert [d.name for d in devices[:3]] == ["gpu-0-mig-19-0-1", "gpu-0-mig-19-1-1", "gpu-0-mig-19-2-1"]
    assert [(d.attributes[GPU]["index"], d.attributes[GPU]["parentIndex"]) for d in devices[6:8]] == [(6, 0), (0, 1)]


def test_dynamic_mig_publishes_placements_consuming_shared_counters(fleet):
    inv = inventory(fleet, driver="0.5.0-dev", kubernetes="1.34",
                    pools=[{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}])
    slices = [s for s in inv.slices if s.driver == GPU]
    limits = load_table("kubernetes")["limits"]
    assert len(slices) == 4 and all(s.slice_count == 4 for s in slices)  # 14 counters per GPU, at most 32 per slice
    for s in slices:
        assert len(s.devices) <= limits["devicesPerSlice"]
        assert sum(len(c) for c in s.shared_counters.values()) <= limits["sharedCountersPerSlice"]
        for d in s.devices:  # 1.34: a device consumes counters of its own slice only
            assert all(use.counter_set in s.shared_counters for use in d.consumes)
    gpu0 = [d for d in slices[0].devices if d.name.startswith("gpu-0")]
    full = gpu0[0]
    assert full.name == "gpu-0" and full.attributes[GPU]["type"] == "gpu"
    assert {c for c, _ in full.consumes[0].counters} >= {"multiprocessors", "memory-slice-0", "memory-slice-7"}
    placements = [d for d in gpu0 if d.attributes[GPU]["type"] == "mig"]
    assert len(placements) == 7 + 7 + 4 + 3 + 2 + 1 + 1  # every placement of every H100 profile
    three = [d for d in placements if d.attributes[GPU]["profile"] == "3g.40gb"]
    assert [d.name for d in three] == ["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"]
    assert dict(three[1].consumes[0].counters).keys() >= {"memory-slice-4", "memory-slice-7"}
    assert "memory-slice-0" not in dict(three[1].consumes[0].counters)
    assert "uuid" not in three[0].attributes[GPU]  # a placement has no MIG UUID until a claim creates it


@pytest.mark.parametrize("driver, gpu_lacks, placement_lacks", [
    # v25.12.0 partitions.go: the full GPU from PartDevAttributes (+ pcieRoot), a placement from MigSpec.PartAttributes
    ("25.12.0", {"addressingMode"}, {"addressingMode", "resource.kubernetes.io/pcieRoot"}),
    # main: both from the default path's Attributes() (hardware/*/driver-main-0.5.0-dev-dynamic-mig.json)
    ("0.5.0-dev", set(), set()),
])
def test_dynamic_mig_attributes_follow_the_line(fleet, driver, gpu_lacks, placement_lacks):
    pool = {**dynamic_pool(count=1), "host": {"addressingMode": "HMM", "numaNodes": 1}}
    inv = inventory(fleet, driver=driver, kubernetes="1.35", pools=[pool])
    names = {d.name: {n if dom == GPU else f"{dom}/{n}" for dom, values in d.attributes.items() for n in values} for d in gpu_devices(inv)}
    every = {"addressingMode", "resource.kubernetes.io/pcieRoot"}
    assert every - names["gpu-0"] == gpu_lacks
    assert every - names["gpu-0-mig-1g10gb-19-0"] == placement_lacks
    static = inventory(fleet, driver=driver, kubernetes="1.35", pools=[{**pool, "mig": {"layout": "all-1g.10gb"}}])
    assert every <= {n if dom == GPU else f"{dom}/{n}" for dom, values in gpu_devices(static)[0].attributes.items() for n in values}


def dynamic_pool(nodes=1, count=8):
    return {"name": "dyn", "nodes": nodes, "gpu": {"model": "H100-80GB", "count": count}, "mig": {"layout": "dynamic"}}


def _published(inv, node: str) -> tuple[int, int]:
    """(full GPUs, MIG placements) the GPU plugin publishes on `node`."""
    devices = [d for s in inv.slices if s.driver == GPU and s.node_name == node for d in s.devices]
    return (sum(d.attributes[GPU]["type"] == "gpu" for d in devices), sum(d.attributes[GPU]["type"] == "mig" for d in devices))


def placements(model: str) -> int:
    """Every placement of every MIG profile of one GPU of `model` (the catalog's geometry)."""
    mig = gpu_models()[model].mig
    assert mig is not None
    return sum(len(p.placements) for p in mig.profiles.values())


H100_PLACEMENTS = placements("H100-80GB")


@pytest.mark.parametrize(("driver", "model", "declared", "published"), [
    # held-out review (issue 45): the gate is the driver's, so a whole-GPU Hopper pool beside a dynamic one is
    # partitioned too (nvlib.go isDynamicMIGCapable: Hopper+ whatever its MIG mode, full GPU beside its placements)
    ("0.5.1", "H200-141GB", False, (2, 2 * placements("H200-141GB"))),
    ("0.4.1", "B200-180GB", False, (2, 2 * placements("B200-180GB"))),
    ("25.12.0", "H200-141GB", False, (2, 2 * placements("H200-141GB"))),
    # Ampere toggles MIG mode only with a reset: from 0.4, partitions only with MIG mode on at start-up (the pool that
    # asks for dynamic MIG), and then no full GPU; a whole-GPU Ampere pool (MIG mode off) stays whole
    ("0.5.1", "A100-80GB", False, (2, 0)),
    ("0.5.1", "A100-80GB", True, (0, 2 * placements("A100-80GB"))),
    # 25.12: every GPU, the full GPU and every placement (nvlib.go@v25.12.0:237-263)
    ("25.12.0", "A100-80GB", False, (2, 2 * placements("A100-80GB"))),
    ("25.12.0", "A100-80GB", True, (2, 2 * placements("A100-80GB"))),
])
def test_the_dynamic_mig_gate_partitions_every_gpu_the_driver_partitions(fleet, driver, model, declared, published):
    other = {"name": "other", "nodes": 1, "gpu": {"model": model, "count": 2}}
    if declared:
        other["mig"] = {"layout": "dynamic"}
    pools = [dynamic_pool(count=1), other]  # the H100 pool asks for dynamic MIG: the gate is on for the cluster
    kubernetes = "1.36" if driver.startswith("0.") else "1.34"
    inv = inventory(fleet, driver=driver, kubernetes=kubernetes, pools=pools)
    assert _published(inv, "dyn-0") == (1, H100_PLACEMENTS)
    assert _published(inv, "other-0") == published
    if not declared:  # without the gate (no pool asks for it) the same pool is whole GPUs
        assert _published(inventory(fleet, driver=driver, kubernetes=kubernetes, pools=[other]), "other-0") == (2, 0)


def test_the_gate_set_in_the_values_partitions_the_hopper_pools_too(fleet):
    values = {"featureGates": {"DynamicMIG": True}}
    inv = inventory(fleet, driver="0.5.1", kubernetes="1.36", pools=[h100_pool()], draDriver={"version": "0.5.1", "values": values})
    assert _published(inv, "h100-0") == (8, 8 * H100_PLACEMENTS)


@pytest.mark.parametrize("kubernetes", ["1.34", "1.35"])
def test_every_node_of_a_pool_is_packed_into_slices_alike(fleet, kubernetes):
    """Synthesis packs a pool's first node and reuses the packing: each node's slices hold that node's own
    devices and counter sets, in the same shape."""
    inv = inventory(fleet, driver="0.5.0-dev", kubernetes=kubernetes, pools=[dynamic_pool(nodes=3)])
    by_node = {}
    for s in inv.slices:
        if s.driver == GPU:
            by_node.setdefault(s.node_name, []).append(s)
    shapes = {node: [(s.name.removeprefix(node), [d.name for d in s.devices], sorted(s.shared_counters), s.slice_count)
                     for s in slices] for node, slices in by_node.items()}
    assert len(by_node) == 3 and len({repr(v) for v in shapes.values()}) == 1
    for node, slices in by_node.items():
        uuids = {d.attributes[GPU]["uuid"] for s in slices for d in s.devices if "uuid" in d.attributes[GPU]}
        assert uuids and all(d.node_name in (None, node) for s in slices for d in s.devices)
        assert uuids.isdisjoint({d.attributes[GPU].get("uuid") for n, other in by_node.items() if n != node
                                 for s in other for d in s.devices})


@pytest.mark.parametrize("count", [8, 2])
def test_dynamic_mig_on_1_35_keeps_counter_sets_in_slices_of_their_own(fleet, count):
    inv = inventory(fleet, driver="0.5.0-dev", kubernetes="1.35", pools=[dynamic_pool(count=count)])
    slices = [s for s in inv.slices if s.driver == GPU]
    counter_slices = [s for s in slices if s.shared_counters]
    assert counter_slices and all(not s.devices for s in counter_slices)  # 1.35: devices or sharedCounters, never both
    assert all(len(s.shared_counters) <= 8 and all(len(c) <= 32 for c in s.shared_counters.values()) for s in counter_slices)
    device_slices = [s for s in slices if s.devices]
    assert all(len(s.devices) <= 64 for s in device_slices)  # any device consumes counters: at most 64
    assert all(s.slice_count == len(slices) and s.pool == "dyn-0" for s in slices)
    defined = {name for s in counter_slices for name in s.shared_counters}
    assert len(defined) == count == sum(len(s.shared_counters) for s in counter_slices)  # unique in the pool
    assert {u.counter_set for s in device_slices for d in s.devices for u in d.consumes} == defined
    assert all(len(d.consumes) <= 2 for s in device_slices for d in s.devices)
    assert len(gpu_devices(inv)) == count * 26
    for item in inventory_list(inv)["items"]:
        assert not ("devices" in item["spec"] and "sharedCounters" in item["spec"])
        kubernetes_validate.validate(item, "1.35.0", strict=True)


def test_dynamic_mig_slices_of_1_34_pass_the_1_34_schema(fleet):
    inv = inventory(fleet, driver="0.5.0-dev", kubernetes="1.34", pools=[dynamic_pool()])
    for item in inventory_list(inv)["items"]:
        kubernetes_validate.validate(item, "1.34.0", strict=True)


def test_partition_attributes_need_the_fabric_flavour_and_a_workload_using_it(fleet):
    pools = [{"name": "h200", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}, "nvlink": {"partitions": [2, 4, 8]}}]
    fabric = {"dra.yaml": [workload_doc("allreduce", gpu={"fabric": {"partitionSize": 4}})]}
    inv = inventory(fleet, driver="0.5.0-dev", kubernetes="1.35", pools=pools, workloads=fabric,
                    draDriver={"fabric": "partitionAttributes"})
    attrs = [d.attributes[GPU] for d in gpu_devices(inv)]
    assert [(a["gpuModuleID"], a["partition8"], a["partition4"], a["partition2"]) for a in attrs] == [
        (1, 0, 1, 3), (2, 0, 1, 3), (3, 0, 1, 4), (4, 0, 1, 4), (5, 0, 2, 5), (6, 0, 2, 5), (7, 0, 2, 6), (8, 0, 2, 6)]
    assert "partition1" not in attrs[0]  # only the sizes the pool's fabric offers
    plain = inventory(fleet, driver="0.5.0-dev", kubernetes="1.35", pools=pools, draDriver={"fabric": "partitionAttributes"})
    assert "partition4" not in gpu_devices(plain)[0].attributes[GPU]  # gate FabricManagerPartitioning is off


def test_partition_ids_follow_the_fabric_manager_table():
    assert partition_ids(4) == {0: {4: 0, 2: 1, 1: 3}, 1: {4: 0, 2: 1, 1: 4}, 2: {4: 0, 2: 2, 1: 5}, 3: {4: 0, 2: 2, 1: 6}}


def test_compute_domain_slice_per_node_only_when_compute_domains_are_enabled(fleet):
    multi = {"t.yaml": [workload_doc("trainer", gpu={"count": 4, "multiNode": {"nodes": 2}})]}
    inv = inventory(fleet, pools=[{"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}], workloads=multi)  # ComputeDomains need multi-node NVLink
    cd = [s for s in inv.slices if s.driver == "compute-domain.nvidia.com"]
    assert [(s.node_name, [d.name for d in s.devices]) for s in cd] == [("gb200-0", ["channel-0", "daemon-0"]),
                                                                         ("gb200-1", ["channel-0", "daemon-0"])]
    assert cd[0].devices[0].attributes == {"compute-domain.nvidia.com": {"type": "channel", "id": 0}}
    assert not [s for s in inventory(fleet, pools=[h100_pool()]).slices if s.driver == "compute-domain.nvidia.com"]


@pytest.mark.parametrize("kubernetes, driver, api", [("1.32", "25.8.1", "v1beta1"), ("1.33", "25.8.1", "v1beta2"),
                                                     ("1.34", "25.12.0", "v1")])
def test_inventory_list_is_valid_for_the_cluster_version(fleet, kubernetes, driver, api):
    inv = inventory(fleet, driver=driver, kubernetes=kubernetes, pools=[h100_pool(), a100_mig_pool()])
    listing = inventory_list(inv)
    assert listing["kind"] == "List" and listing["apiVersion"] == "v1"
    for item in listing["items"]:
        assert item["apiVersion"] == f"resource.k8s.io/{api}"
        kubernetes_validate.validate(item, f"{kubernetes}.0", strict=True)
    device = listing["items"][0]["spec"]["devices"][0]
    if api == "v1beta1":
        assert set(device) == {"name", "basic"} and "attributes" in device["basic"]
    else:
        assert "basic" not in device and "attributes" in device
        assert device["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}  # the driver's domain is implicit


def test_every_published_attribute_has_a_value_source():
    for device_type, attributes in load_table("dra_driver")["attributes"].items():
        assert set(attributes) <= set(_VALUES), device_type


def test_builtin_class_selectors_are_the_chart_templates_verbatim():
    for line in driver_lines().values():
        version = {"25.3": "v25.3.2", "25.8": "v25.8.1", "25.12": "v25.12.0", "0.4": "v0.4.1", "0.5": "main-0.5.0-dev"}[line.id]
        templates = REFERENCE / "nvidia-dra-driver-gpu" / version / "templates"
        found = {}
        assert list(templates.glob("deviceclass-*.yaml")), templates
        for path in templates.glob("deviceclass-*.yaml"):
            text = path.read_text()
            name = re.search(r"^  name: (\S+)", text, re.M).group(1)
            found[name] = re.search(r'expression: "(.*)"', text).group(1)
        assert {n: c.selector for n, c in builtin_classes(line).items()} == found, line.id


def test_attributes_copied_across_a_pools_nodes_equal_computing_them_per_node(monkeypatch):
    """Synthesis computes a device's attributes on the first node of its pool and copies them, replacing only
    the attributes listed in _PER_NODE. An attribute that varies by node but is missing from that list
    would be copied wrongly: compare against computing every attribute on every node."""
    from compiler.pipeline import compile_fleet
    from compiler.place.inventory import synth

    from conftest import EXAMPLES

    compiled = list(compile_fleet(EXAMPLES).compiled.values())
    fast = [inventory_list(synthesize_for(c)) for c in compiled]
    monkeypatch.setattr(synth._Builder, "device", lambda self, name, ctx, plan, place, capacity, consumes=():
                        synth.Device(name, synth.GPU_DRIVER, synth._attributes(ctx, plan), capacity, consumes))
    # ... and the packing of devices into slices, worked out on a pool's first node and reused, computed per node
    layouts = []
    real_packing, real_pack = synth._packing, synth._pack
    monkeypatch.setattr(synth, "_packing", lambda groups, layout: layouts.append(layout) or real_packing(groups, layout))
    monkeypatch.setattr(synth, "_pack", lambda node, groups, packing: real_pack(node, groups, real_packing(groups, layouts[-1])))
    assert [inventory_list(synthesize_for(c)) for c in compiled] == fast


def _example_inventories():
    from compiler.pipeline import compile_fleet

    from conftest import EXAMPLES

    return [synthesize_for(c) for c in compile_fleet(EXAMPLES).compiled.values()]


def test_devices_of_one_template_differ_only_in_the_varying_attributes():
    """What lets a selector be evaluated once per template (inventory.selection)."""
    seen = {}
    for inventory in _example_inventories():
        assert inventory.varying
        for device in inventory.devices:
            assert device.template >= 0
            view = (device.driver, repr(device.capacity), repr({
                domain: {k: v for k, v in values.items() if (domain, k) not in inventory.varying}
                for domain, values in device.attributes.items()}))
            assert seen.setdefault((inventory.cluster, device.template), view) == view, device.name
    assert len({t for t in seen}) < sum(len(i.devices) for i in _example_inventories())  # templates are shared


SELECTORS = [
    "device.driver == 'gpu.nvidia.com'",
    "device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-0')",  # varies within a template
    "device.attributes['gpu.nvidia.com'].parentUUID.endsWith('7')",  # varies; fails on full GPUs (no key)
    "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')",  # fails on compute-domain devices
    "'uuid' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com']['uuid'] > 'GPU-8'",
    "device.attributes.exists(d, d == 'gpu.nvidia.com')",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
]


def test_selection_by_template_equals_evaluating_every_device():
    from compiler.cel import CelEvaluationError, compile_selector
    from compiler.place.inventory.selection import select

    for inventory in _example_inventories():
        everything = tuple(range(len(inventory.devices)))
        for text in SELECTORS:
            selector = compile_selector(text)
            matched, failures = [], {}
            for i in everything:
                try:
                    if selector.matches_uncached(inventory.devices[i]):
                        matched.append(i)
                except CelEvaluationError as exc:
                    failures[i] = str(exc)
            assert select(inventory, selector, everything) == (tuple(matched), failures), (inventory.cluster, text)


def test_a_node_keeps_its_complete_older_generation_of_a_pool_moving_away():
    """The allocator gathers a node's own slices and keeps their newest generation: complete, it is used even
    when the pool's newer generation sits on another node; incomplete, it is obsolete."""
    from compiler.place.inventory import Device, NodeInfo, ResourceSlice, build_inventory

    def piece(name: str, node: str, generation: int, device: str, count: int = 2) -> ResourceSlice:
        return ResourceSlice(name, "d", "p", generation, count, [Device(device, "d", {}, {})], node_name=node)

    nodes = [NodeInfo("n1", None), NodeInfo("n2", None), NodeInfo("n3", None)]
    inv = build_inventory("c", "test", "resource.k8s.io/v1", [
        piece("a", "n1", 1, "x"), piece("b", "n1", 1, "y"),  # complete at generation 1 on n1
        piece("c", "n2", 2, "x"), piece("d", "n2", 2, "y"),  # generation 2 on n2
        piece("e", "n3", 1, "z")], nodes)  # one of two slices at generation 1 on n3: obsolete
    assert inv.pools[("d", "p")].generation == 2 and list(inv.views) == [("d", "p", "n1")]
    assert inv.views[("d", "p", "n1")].generation == 1 and not inv.views[("d", "p", "n1")].incomplete
    assert [(inv.slices[d.slice_index].node_name, d.name, inv.pool_key(d)) for d in inv.devices] == [
        ("n1", "x", ("d", "p", "n1")), ("n1", "y", ("d", "p", "n1")), ("n2", "x", ("d", "p")), ("n2", "y", ("d", "p"))]
