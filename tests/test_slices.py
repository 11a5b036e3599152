"""A real inventory: ResourceSlices exported with kubectl, loaded instead of the synthesized ones."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from compiler.cel import Quantity, Semver
from compiler.diagnostics import InputError
from compiler.load import state as loader
from compiler.place.inventory.load import load_slices

from conftest import SLICES_FIXTURE as FIXTURE
from conftest import SLICES_FIXTURE_POOLS, cluster_doc, compile_single

GPU = "gpu.nvidia.com"


def real_cluster(fleet, workloads=None):
    return fleet(clusters=[cluster_doc(pools=SLICES_FIXTURE_POOLS)], workloads=workloads or {})


def load(fleet, path: Path = FIXTURE):
    compiled = compile_single(real_cluster(fleet))
    return load_slices(path, compiled.cluster, compiled.node_labels)


def fixture_line(text: str, needle: str, after: int = 0) -> int:
    lines = FIXTURE.read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if i >= after and needle in line)


def test_the_fixture_is_what_a_1_34_api_server_serves():
    for item in yaml.safe_load(FIXTURE.read_text())["items"]:
        kubernetes_validate.validate(item, "1.34.0", strict=True)


def test_loads_an_exported_list(fleet):
    inv = load(fleet)
    assert [(n.name, n.pool) for n in inv.nodes] == [("ip-10-0-1-17", "h100"), ("ip-10-0-1-18", "h100"), ("ip-10-0-2-40", "a100")]
    gpus = [d for d in inv.devices if d.driver == GPU]
    assert [d.name for d in gpus[:4]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]  # generation 3 replaced generation 2
    first = gpus[0]
    assert first.attributes["resource.kubernetes.io"] == {"pciBusID": "0000:18:00.0", "pcieRoot": "pci0000:15"}
    assert first.attributes[GPU]["driverVersion"] == Semver.parse("570.124.6")
    assert first.capacity[GPU]["memory"] == Quantity.parse("81559Mi")
    mig = [d for d in gpus if d.attributes[GPU]["type"] == "mig"]
    assert [str(d.capacity[GPU]["memory"]) for d in mig] == ["40192Mi", "9728Mi", "9728Mi"]
    assert inv.pools[(GPU, "ip-10-0-1-18")].incomplete


def test_incomplete_pools_and_stale_generations_are_reported_with_their_line(fleet):
    inv = load(fleet)
    messages = {w.message: w for w in inv.warnings}
    incomplete = messages["resource pool gpu.nvidia.com/ip-10-0-1-18 is incomplete: 1 of 2 slices at generation 1"]
    assert incomplete.severity == "warning" and incomplete.file == str(FIXTURE)
    assert incomplete.line == fixture_line("", "- apiVersion: resource.k8s.io/v1", after=fixture_line("", "ip-10-0-1-18-gpu") - 5)
    stale = [w for w in inv.warnings if "generation 3 replaces it" in w.message]
    assert len(stale) == 1 and "ip-10-0-1-17-gpu.nvidia.com-4rf7d" in stale[0].message


def test_nodes_outside_every_pool_are_reported(fleet):
    compiled = compile_single(fleet(clusters=[cluster_doc(pools=SLICES_FIXTURE_POOLS[:1])]))
    inv = load_slices(FIXTURE, compiled.cluster, compiled.node_labels)
    assert [n.name for n in inv.nodes if n.pool is None] == ["ip-10-0-2-40"]
    (w,) = [w for w in inv.warnings if w.path == "(nodes)"]
    assert w.message == "1 node(s) belong to no node pool of cluster 'c1': ip-10-0-2-40"


def test_json_exports_load_like_yaml(fleet, tmp_path):
    as_json = tmp_path / "slices.json"
    as_json.write_text(json.dumps(yaml.safe_load(FIXTURE.read_text())))
    a, b = load(fleet), load(fleet, as_json)
    assert [(d.name, d.attributes, d.capacity) for d in a.devices] == [(d.name, d.attributes, d.capacity) for d in b.devices]


def test_large_exports_take_the_fast_path_and_still_point_at_lines(fleet, tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "TRACKED_BYTES", 100)
    assert len(load(fleet).devices) == len(load_slices(FIXTURE, compile_single(real_cluster(fleet)).cluster).devices)
    broken = tmp_path / "broken.yaml"
    broken.write_text(FIXTURE.read_text().replace("value: 9728Mi", "value: 9.5GB", 1))
    with pytest.raises(InputError) as exc:
        load(fleet, broken)
    (d,) = exc.value.diagnostics
    assert d.line == fixture_line("", "value: 9728Mi") and "'9.5GB' is not a Kubernetes quantity" in d.message


def _broken(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    text = FIXTURE.read_text()
    assert old in text
    path = tmp_path / "slices.yaml"
    path.write_text(text.replace(old, new, count))
    return path


@pytest.mark.parametrize("old, new, path, message", [
    ("      generation: 1\n      name: ip-10-0-1-18\n", "      generation: 1\n", "items[3].spec.pool.name",
     "required field 'name' is missing"),
    ("      name: gpu-1\n    driver: gpu.nvidia.com\n    nodeName: ip-10-0-1-18",
     "      name: gpu-0\n    driver: gpu.nvidia.com\n    nodeName: ip-10-0-1-18", "items[3].spec.devices[1].name",
     "duplicate device name 'gpu-0' in slice ip-10-0-1-18-gpu.nvidia.com-p2c6v (first at line"),
    ("          value: 40192Mi", "          value: 40GB", "items[4].spec.devices[0].capacity.memory.value",
     "'40GB' is not a Kubernetes quantity"),
    ("        id:\n          int: 0\n        type:\n          string: channel",
     "        id:\n          float: 0.5\n        type:\n          string: channel", "items[2].spec.devices[0].attributes.id",
     "unknown attribute type 'float'"),
    # DRAListTypeAttributes is alpha, off by default on every minor gpuc targets: the cluster's scheduler would match
    # no constraint with the value, and consumers built without the gate fail on it
    ("        id:\n          int: 0\n        type:\n          string: channel",
     "        id:\n          ints: [0, 1]\n        type:\n          string: channel", "items[2].spec.devices[0].attributes.id",
     "a list-typed attribute (ints) needs the DRAListTypeAttributes feature gate, off by default on Kubernetes 1."),
    ("        id:\n          int: 0\n        type:\n          string: channel",
     "        id:\n          ints: [0, x]\n        type:\n          string: channel", "items[2].spec.devices[0].attributes.id",
     "an element of ints has a str value 'x'"),
    ("          version: 570.124.6\n        parentUUID:", "          version: \"570.124\"\n        parentUUID:",
     "items[4].spec.devices[0].attributes.driverVersion",
     "'570.124' is not a semantic version"),
    ("    nodeName: ip-10-0-2-40\n", "", "items[4].spec", "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection"),
    ("  kind: ResourceSlice\n  metadata:\n    creationTimestamp: \"2026-08-01", "  metadata:\n    creationTimestamp: \"2026-08-01",
     "items[4]", "not a Kubernetes object: kind missing"),
])
def test_malformed_exports_are_input_errors_with_file_line_and_field(fleet, tmp_path, old, new, path, message):
    broken = _broken(tmp_path, old, new)
    with pytest.raises(InputError) as exc:
        load(fleet, broken)
    (d,) = exc.value.diagnostics
    assert d.file == str(broken) and d.path == path and message in d.message
    assert d.line > 0 and broken.read_text().splitlines()[d.line - 1].strip(), d.render()


def test_v1beta1_shape_under_v1_is_named(fleet, tmp_path):
    text = FIXTURE.read_text().replace("    - attributes:\n        id:\n          int: 0\n        type:\n          string: channel\n      name: channel-0",
                                       "    - basic:\n        attributes:\n          id:\n            int: 0\n      name: channel-0")
    path = tmp_path / "slices.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load(fleet, path)
    assert "`basic` is the resource.k8s.io/v1beta1 device shape" in exc.value.diagnostics[0].message


def test_an_export_without_slices(fleet, tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")
    with pytest.raises(InputError) as exc:
        load(fleet, path)
    d = exc.value.diagnostics[0]
    assert d.file == str(path) and "the cluster state holds no ResourceSlice (only Pod)" in d.message
    assert "kubectl get resourceslices -o yaml" in d.hint


@pytest.mark.parametrize("fast", [False, True])
def test_hostile_exports_are_refused_before_they_expand_or_recurse(fleet, tmp_path, monkeypatch, fast):
    """kubectl never writes aliases or deep nesting: a bomb or a runaway generator is bad input, quickly."""
    if fast:
        monkeypatch.setattr(loader, "TRACKED_BYTES", 100)  # the libyaml path for large exports
    layers = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("apiVersion: v1\nkind: List\n" + "\n".join(layers) + "\nitems: [*a8]\n")
    with pytest.raises(InputError) as exc:
        load(fleet, bomb)
    assert "expands to more than" in exc.value.diagnostics[0].message
    deep = tmp_path / "deep.yaml"
    deep.write_text("apiVersion: v1\nkind: List\nitems: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(InputError) as exc:
        load(fleet, deep)
    d = exc.value.diagnostics[0]
    assert d.line == 3 and "nested more than 64 levels" in d.message


def _slice(name: str, pool: str, generation: int, count: int, devices: list, counters: list | None = None) -> dict:
    spec = {"driver": GPU, "nodeName": pool, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices}
    if counters:
        spec["sharedCounters"] = counters
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def _write(tmp_path: Path, items: list[dict]) -> Path:
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False))
    return path


def test_the_incomplete_pool_warning_points_at_a_current_slice_not_a_stale_one(fleet, tmp_path):
    gpu = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
    path = _write(tmp_path, [_slice("h100-0-old", "h100-0", 1, 1, [gpu]), _slice("h100-0-new", "h100-0", 2, 2, [gpu])])
    inv = load(fleet, path)
    (incomplete,) = [w for w in inv.warnings if "is incomplete" in w.message]
    lines = path.read_text().splitlines()
    assert incomplete.line == next(i + 1 for i, line in enumerate(lines) if "h100-0-new" in line) - 3  # its `- apiVersion`


def test_a_device_consuming_a_counter_set_its_pool_does_not_define_is_reported(fleet, tmp_path):
    mig = {"name": "gpu-0-mig-1g10gb-19-0", "attributes": {"type": {"string": "mig"}},
           "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {"memory-slice-0": {"value": "1"}}}]}
    other = {"name": "gpu-1-mig-1g10gb-19-0", "attributes": {"type": {"string": "mig"}},
             "consumesCounters": [{"counterSet": "gpu-1-counter-set", "counters": {"memory-slice-0": {"value": "1"}}}]}
    counters = [{"name": "gpu-1-counter-set", "counters": {"memory-slice-0": {"value": "1"}}}]
    path = _write(tmp_path, [_slice("h100-0-a", "h100-0", 1, 2, [mig, other]),
                             _slice("h100-0-counters", "h100-0", 1, 2, [], counters)])
    inv = load(fleet, path)
    (warning,) = [w for w in inv.warnings if "counter set" in w.message]
    assert warning.severity == "warning" and warning.path == "items[0].spec.devices[0]"
    assert ("device 'gpu-0-mig-1g10gb-19-0' of resource pool gpu.nvidia.com/h100-0 consumes counter set "
            "'gpu-0-counter-set', which no slice of the pool defines") in warning.message
    # gpu-1's set sits in the pool's counter slice (the 1.35 layout): resolved across the pool, no warning.
    assert inv.counter_sets[(GPU, "h100-0")]["gpu-1-counter-set"]["memory-slice-0"] == Quantity(1)


def test_list_attributes_decode_with_their_kind_and_write_back_as_read():
    from compiler.cel import AttrList
    from compiler.place.inventory import Device
    from compiler.place.inventory.codec import counter_use, decode_attribute, encode_attribute, encode_device
    for raw, value in [({"ints": [4, 5]}, AttrList("ints", (4, 5))), ({"strings": []}, AttrList("strings", ())),
                       ({"bools": [True]}, AttrList("bools", (True,))),
                       ({"versions": ["1.2.3"]}, AttrList("versions", (Semver.parse("1.2.3"),)))]:
        assert decode_attribute(raw) == value and encode_attribute(value) == raw
    with pytest.raises(ValueError, match="attribute of type ints has a int value 4, not a list"):
        decode_attribute({"ints": 4})
    with pytest.raises(ValueError, match="an element of bools has a int value 1"):
        decode_attribute({"bools": [1]})
    grouped = counter_use("set", {"memory": Quantity.parse("10Gi")}, ("mig",))
    assert encode_device(Device("d", "x", {}, {}, (grouped,)), False)["consumesCounters"] == [
        {"counterSet": "set", "counters": {"memory": {"value": "10Gi"}}, "compatibilityGroups": ["mig"]}]
    with pytest.raises(ValueError, match="exactly one of string, int, bool, version, ints, bools, strings, versions"):
        decode_attribute({})  # no value: the scheduler's CEL fails on it ("unsupported attribute value")


def test_compatibility_groups_are_read_with_each_counter_draw():
    from compiler.place.inventory.load import _consumes, _Reader
    reader = _Reader()
    raw = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}, "compatibilityGroups": ["mig"]},
           {"counterSet": "gpu-1", "counters": {}, "compatibilityGroups": ["mig", 7]}]
    (use,) = _consumes(reader, raw, (None, ("consumesCounters",)))  # type: ignore[arg-type]
    assert use.groups == ("mig",)
    assert [(where[1], message) for where, message, _ in reader.problems] == [
        (("consumesCounters", 1, "compatibilityGroups"), "compatibility groups are non-empty strings")]


def test_a_pool_moving_between_nodes_is_named_where_its_old_generation_still_counts(fleet, tmp_path):
    def piece(name: str, node: str, generation: int) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "example.com", "pool": {"name": "mover", "generation": generation, "resourceSliceCount": 1},
                         "nodeName": node, "devices": [{"name": "dev-0"}]}}
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        piece("old", "ip-10-0-1-17", 1), piece("new", "ip-10-0-1-18", 2)]}))
    inv = load(fleet, path)
    (w,) = [w for w in inv.warnings if "mover" in w.message]
    assert w.message == ("slice old belongs to generation 1 of pool example.com/mover, which is complete on node "
                         "ip-10-0-1-17 while generation 2 is on other nodes")
    assert [d.name for d in inv.devices] == ["dev-0", "dev-0"]


def test_skip_node_operations_are_read_and_written_back(fleet, tmp_path):
    from compiler.place.inventory.codec import encode_slice
    piece = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "cp"},
             "spec": {"driver": "example.com", "pool": {"name": "central", "generation": 1, "resourceSliceCount": 1},
                      "nodeName": "ip-10-0-1-17", "skipNodeOperations": ["*"], "devices": [{"name": "v-0"}]}}
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [piece]}))
    (s,) = load(fleet, path).slices
    assert s.skip_node_operations == ("*",)
    assert encode_slice(s, "resource.k8s.io/v1", {})["spec"]["skipNodeOperations"] == ["*"]
    piece["spec"]["skipNodeOperations"] = [""]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [piece]}))
    with pytest.raises(InputError, match="node operations are non-empty strings"):
        load(fleet, path)
