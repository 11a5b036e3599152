"""A `--state` export whose ResourceSlices have fields of the wrong type (attributes a list, a device a string,
capacity a number, ...) is a finding naming file, line and field in every command that reads it, never an
internal error: read_state checks the types as it loads (compiler/load/state_shapes.py)."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import kubectl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.check.status import cluster_status
from compiler.diagnostics import InputError, format_path, parse_path
from compiler.load.state import read_state
from compiler.place import place_cluster, running_inventory, synthesize_for
from compiler.place.inventory.codec import inventory_list
from compiler.validate.state_models import models_from_state

from conftest import SLICES_FIXTURE, SLICES_FIXTURE_POOLS, cluster_doc, compile_single, gpuc, workload_doc, write_fleet

GPU = "gpu.nvidia.com"
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: ten times faster for the property's many exports
POOLS = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 1}, "mig": {"layout": "dynamic"}},
         {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 2}}]
# a v1beta1 slice (device fields under `basic`) with the fields synthesis never writes: a request policy, a taint,
# a node selector
BETA_SLICE = {
    "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "fabric-0"},
    "spec": {"driver": "fabric.example.com", "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
             "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                 {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]},
             "devices": [{"name": "link-0", "basic": {
                 "attributes": {"lanes": {"int": 2}, "kind": {"string": "link"}, "firmware": {"version": "1.2.3"}},
                 "capacity": {"bandwidth": {"value": "100Gi", "requestPolicy": {
                     "default": "1Gi", "validRange": {"min": "1Gi", "max": "100Gi", "step": "1Gi"}}}},
                 "taints": [{"key": "maintenance", "value": "soon", "effect": "NoSchedule"}]}}]}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A cluster with a dynamic-MIG pool (shared and consumed counters) and a full-GPU pool, and the export of
    what its driver publishes, with its Nodes and an allocated claim."""
    root = tmp_path_factory.mktemp("shapes")
    fleet = write_fleet(root / "fleet", [cluster_doc(driver="0.5.0-dev", kubernetes="1.35", pools=POOLS)],
                        {"w.yaml": [workload_doc()]})
    compiled = compile_single(fleet)
    inventory = synthesize_for(compiled)
    items = [kubectl.node(n.name, dict(compiled.node_labels.get(n.pool or "", {}))) for n in inventory.nodes]
    items += kubectl.slices(inventory_list(inventory)) + [copy.deepcopy(BETA_SLICE)]
    items.append(kubectl.allocated_claim("held", "research", [(GPU, "h100-0", "gpu-0")], node_name="h100-0", pod="held-pod"))
    return fleet, compiled, {"apiVersion": "v1", "kind": "List", "items": items}


def _one_of_each_shape(export: dict) -> dict:
    """The export with, in each ResourceSlice, only the devices that bring a field no earlier device of it has, and
    its last device (an index other than 0). The property below draws a field, then a place of that field: the other
    devices (24 MIG placements of the same few shapes) only add places of fields already there, and 80% of the bytes
    every example writes and gpuc parses. Every field of the whole export is still there (asserted)."""
    small = copy.deepcopy(export)
    for item in small["items"]:
        devices = item["spec"].get("devices") if item["kind"] == "ResourceSlice" else None
        if devices:
            seen: set[tuple] = set()
            kept = []
            for index, device in enumerate(devices):
                fields = {tuple("*" if isinstance(p, int) else p for p in path) for path in _paths(device)}
                if not fields <= seen or index == len(devices) - 1:
                    kept.append(device)
                    seen |= fields
            item["spec"]["devices"] = kept
    assert _places(small).keys() == _places(export).keys()
    return small


@pytest.fixture(scope="module")
def small_export(cluster) -> dict:
    return _one_of_each_shape(cluster[2])


def read_everything(compiled, path: Path) -> None:
    """What plan, render --state, status and explain do with an export, in the order they do it."""
    state = read_state([str(path)])
    models_from_state(state)
    inventory, use = running_inventory(compiled, state)
    plan = place_cluster(compiled, inventory, use=use)
    cluster_status(compiled, state, plan)


def test_the_valid_export_reads_cleanly(cluster, small_export, tmp_path):
    _, compiled, export = cluster
    for name, doc in (("whole", export), ("one device of each shape", small_export)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        read_everything(compiled, path)  # the property below starts from an export that is fine


def _paths(value: Any, at: tuple = ()) -> list[tuple]:
    """Every place in a value (mapping values and list items), the value itself first."""
    out = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, at + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _paths(child, at + (i,))
    return out


def _get(value: Any, path: tuple) -> Any:
    for part in path:
        value = value[part]
    return value


TEXT = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=8)  # a wrong type, not a Unicode fuzzer
WRONG = st.one_of(TEXT, st.integers(-3, 10**12), st.booleans(), st.none(), st.floats(allow_nan=False),
                  st.lists(st.one_of(TEXT, st.integers(), st.none()), max_size=3),
                  st.dictionaries(TEXT, st.one_of(TEXT, st.integers(), st.none()), max_size=2))


def _places(export: dict) -> dict[tuple, list[tuple]]:
    """Every place inside the export's ResourceSlices, grouped by field (list indices left out): a device's
    attributes are one field however many devices there are, so that each field is as likely to be drawn."""
    found: dict[tuple, list[tuple]] = {}
    for index, item in enumerate(export["items"]):
        if item["kind"] == "ResourceSlice":
            for path in _paths(item["spec"], ("spec",)):
                found.setdefault(tuple("*" if isinstance(p, int) else p for p in path), []).append(("items", index) + path)
    return found


@st.composite
def mistyped(draw, places: dict[tuple, list[tuple]], export: dict) -> tuple[tuple, Any]:
    """A place inside one of the export's ResourceSlices and a value of another type than the one there."""
    path = draw(st.sampled_from(places[draw(st.sampled_from(sorted(places, key=str)))]))
    old = _get(export, path)
    return path, draw(WRONG.filter(lambda v: type(v) is not type(old)))


def _related(shown: str, changed: tuple) -> bool:
    """Whether a finding's field path is the changed field, or one inside or around it."""
    text = format_path(changed)
    return any(a == b or a.startswith((b + ".", b + "[")) for a, b in ((shown, text), (text, shown)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_value_of_the_wrong_type_anywhere_in_a_slice_is_a_finding_at_its_field(cluster, small_export, data):
    compiled, export = cluster[1], small_export
    path, value = data.draw(mistyped(_places(export), export))
    changed = copy.deepcopy(export)
    _get(changed, path[:-1])[path[-1]] = value
    as_json = data.draw(st.booleans())  # JSON as kubectl writes it (UTF-8, not \\u escapes) and YAML
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / ("state.json" if as_json else "state.yaml")
        file.write_text(json.dumps(changed, indent=1, ensure_ascii=False) if as_json else yaml.dump(changed, Dumper=DUMPER))
        try:
            read_everything(compiled, file)
        except InputError as exc:
            errors = [d for d in exc.diagnostics if d.severity == "error"]
            assert errors and all(d.file == str(file) and d.line > 0 for d in errors), exc.diagnostics
            assert any(_related(d.path, path) for d in errors), \
                f"{format_path(path)} changed, but the findings are elsewhere: {[d.render() for d in errors]}"


def _export(tmp_path: Path, change) -> Path:
    doc = yaml.safe_load(SLICES_FIXTURE.read_text())
    change(doc["items"][0])
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _device(item: dict) -> dict:
    return item["spec"]["devices"][0]


CASES = [
    ("attributes a list", lambda s: _device(s).__setitem__("attributes", [{"productName": "NVIDIA H100"}]),
     "items[0].spec.devices[0].attributes: must be a mapping, got a list", "productName: {string: NVIDIA H100 80GB HBM3}"),
    ("attribute value a string", lambda s: _device(s)["attributes"].__setitem__("productName", "NVIDIA H100 80GB HBM3"),
     "items[0].spec.devices[0].attributes.productName: must be a mapping, got a string", "one typed value"),
    ("attribute of the wrong type", lambda s: _device(s)["attributes"].__setitem__("type", {"string": 7}),
     "items[0].spec.devices[0].attributes.type: attribute of type string has a int value 7", "one typed value"),
    ("capacity a list", lambda s: _device(s).__setitem__("capacity", [{"memory": "80Gi"}]),
     "items[0].spec.devices[0].capacity: must be a mapping, got a list", "memory: {value: 80Gi}"),
    ("capacity a bare quantity", lambda s: _device(s)["capacity"].__setitem__("memory", "80Gi"),
     "items[0].spec.devices[0].capacity.memory: must be a mapping, got a string", "memory: {value: 80Gi}"),
    ("capacity value a mapping", lambda s: _device(s)["capacity"]["memory"].__setitem__("value", {"Mi": 81559}),
     "items[0].spec.devices[0].capacity.memory.value: must be a quantity (a string such as 80Gi, or a number), got a mapping",
     "memory: {value: 80Gi}"),
    ("devices a mapping", lambda s: s["spec"].__setitem__("devices", {"gpu-0": {}}),
     "items[0].spec.devices: must be a list, got a mapping", "devices is a list of mappings"),
    ("a device a string", lambda s: s["spec"]["devices"].__setitem__(0, "gpu-0"),
     "items[0].spec.devices[0]: must be a mapping, got a string", "devices is a list of mappings"),
    ("counters a list", lambda s: _device(s).__setitem__("consumesCounters", [{"counterSet": "gpu-0", "counters": ["memory"]}]),
     "items[0].spec.devices[0].consumesCounters[0].counters: must be a mapping, got a list", "counters map each name"),
    ("shared counters a mapping", lambda s: s["spec"].__setitem__("sharedCounters", {"name": "gpu-0"}),
     "items[0].spec.sharedCounters: must be a list, got a mapping", "sharedCounters is a list"),
    ("pool generation a string", lambda s: s["spec"]["pool"].__setitem__("generation", "2"),
     "items[0].spec.pool.generation: must be an integer, got a string", "generation: INTEGER"),
    ("taints a mapping", lambda s: _device(s).__setitem__("taints", {"key": "k"}),
     "items[0].spec.devices[0].taints: must be a list, got a mapping", "taints is a list"),
]
COMMANDS = {"plan": ["plan"], "render --state": ["render", "-o", "{out}"], "status": ["status", "--cluster", "c1"],
            "explain": ["explain"]}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name,change,finding,hint", CASES, ids=[c[0] for c in CASES])
def test_a_malformed_slice_is_named_by_every_command_that_reads_the_export(fleet, tmp_path, command, name, change, finding, hint):
    path = _export(tmp_path, change)
    root = fleet(clusters=[cluster_doc(pools=SLICES_FIXTURE_POOLS)], workloads={"w.yaml": [workload_doc()]})
    args = [a.format(out=tmp_path / "out") for a in COMMANDS[command]]
    result = gpuc(args[0], root, *args[1:], "--state", path)
    assert result.code == 2, result.err
    first = result.err.splitlines()[0]
    file, line, rest = first.split(":", 2)
    assert file == str(path) and int(line) > 0 and rest == f" error: {finding}", result.err
    last = parse_path(finding.split(":")[0])[-1]
    text = path.read_text().splitlines()[int(line) - 1].strip()
    assert text.startswith("-") if isinstance(last, int) else text.lstrip("- ").startswith(f"{last}:"), \
        f"line {line} is not where {finding.split(':')[0]} is: {text!r}"
    assert hint in result.err and "internal error" not in result.err
    assert not (tmp_path / "out").exists()


def test_a_live_read_names_the_malformed_slice_and_field(tmp_path):
    """No file to point at: the object and its field."""
    doc = yaml.safe_load(SLICES_FIXTURE.read_text())
    _device(doc["items"][0])["attributes"] = [{"productName": "NVIDIA H100"}]
    root = write_fleet(tmp_path / "f", [cluster_doc(pools=SLICES_FIXTURE_POOLS)], {"w.yaml": [workload_doc()]})
    with kubectl.ApiServer(doc["items"]) as server:
        result = gpuc("plan", root, "--kubeconfig", server.kubeconfig(tmp_path / "kc"))
    name = doc["items"][0]["metadata"]["name"]
    assert result.code == 2 and result.err.startswith(
        f"(live) ResourceSlice {name}: error: spec.devices[0].attributes: must be a mapping, got a list\n"), result.err
