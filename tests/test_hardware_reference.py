"""gpuc's synthesized devices are the devices the DRA driver publishes on real GPUs, field by field.

Each `driver-<line>-<mode>.json` under ../shared/reference/hardware/<gpu>/ is the driver's own enumeration run
on a real GPU (README there). Every file is a case: a one-node, one-GPU pool of the catalog model with that
product name, on that driver line, in that mode, whose hosts are declared as the dump's host was
(nodePools[].host), must publish exactly those devices, counter sets, attributes and capacities. Only the
values the README lists as node-specific are not compared (their presence and type are).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compiler.cel import Quantity
from compiler.facts.catalog import gpu_models
from compiler.place import synthesize_for
from compiler.place.inventory.codec import inventory_list

from conftest import REFERENCE, cluster_doc, compile_single

HARDWARE = REFERENCE / "hardware"
# ../shared/reference/hardware/README.md: these differ on every node and are not facts about the model
NODE_SPECIFIC = frozenset({"uuid", "parentUUID", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot",
                           "driverVersion", "cudaDriverVersion"})
LINES = {"v25.12.0": "25.12.0", "main-0.5.0-dev": "0.5.0-dev"}  # the file's driver build -> the version a cluster names
MODES = {"default-gates": None, "dynamic-mig": {"layout": "dynamic"}}
DUMP_NAME = re.compile(r"driver-(?P<line>.+)-(?P<mode>default-gates|dynamic-mig)\.json")


def dumps() -> list[Path]:
    found = sorted(HARDWARE.glob("*/driver-*.json"))
    assert found, f"no hardware dumps under {HARDWARE}: the comparison needs ../shared/reference/hardware/"
    return found


def read_dump(path: Path) -> tuple[list[dict], dict[str, dict]]:
    """The devices and counter sets of a dump: a list of devices (default gates) or of slices with devices."""
    data = json.loads(path.read_text())
    slices = data if data and "devices" in data[0] else [{"devices": data}]
    devices = [d for s in slices for d in s["devices"]]
    counter_sets = {c["name"]: c["counters"] for s in slices for c in s.get("sharedCounters") or []}
    return devices, counter_sets


def model_of(devices: list[dict]) -> str:
    product = devices[0]["attributes"]["productName"]["string"]
    keys = [key for key, model in gpu_models().items() if model.product_name == product]
    assert len(keys) == 1, f"catalog models with productName {product!r}: {keys}"
    return keys[0]


def declared_host(devices: list[dict]) -> dict:
    """The host as the dump's machine was: its addressingMode, and NUMA nodes (0 when the driver published none)."""
    gpu = next(d for d in devices if d["attributes"]["type"]["string"] == "gpu")
    host: dict = {"numaNodes": 1 if "resource.kubernetes.io/numaNode" in gpu["attributes"] else 0}
    if "addressingMode" in gpu["attributes"]:
        host["addressingMode"] = gpu["attributes"]["addressingMode"]["string"]
    return host


def synthesized(fleet, path: Path) -> tuple[list[dict], dict[str, dict]]:
    match = DUMP_NAME.fullmatch(path.name)
    assert match, f"{path.name}: expected driver-<line>-<default-gates|dynamic-mig>.json"
    devices, _ = read_dump(path)
    pool = {"name": "gpu", "nodes": 1, "gpu": {"model": model_of(devices), "count": 1}, "host": declared_host(devices)}
    if MODES[match["mode"]]:
        pool["mig"] = MODES[match["mode"]]
    doc = cluster_doc(driver=LINES[match["line"]], kubernetes="1.35", pools=[pool],
                      acknowledge=[{"warning": "mig-mode", "reason": "MIG mode is set on the node image"}] if pool.get("mig") else [])
    listed = inventory_list(synthesize_for(compile_single(fleet(clusters=[doc]))))
    gpu_slices = [s["spec"] for s in listed["items"] if s["spec"]["driver"] == "gpu.nvidia.com"]
    return ([d for s in gpu_slices for d in s.get("devices") or []],
            {c["name"]: c["counters"] for s in gpu_slices for c in s.get("sharedCounters") or []})


def _quantities(values: dict) -> dict[str, int]:
    return {name: Quantity.parse(v["value"]).value for name, v in values.items()}


def comparable(device: dict) -> dict:
    """A device as the comparison sees it: node-specific values replaced by their type, quantities by their value."""
    attributes = {name: ({kind: "<node-specific>" for kind in value} if name in NODE_SPECIFIC else value)
                  for name, value in device.get("attributes", {}).items()}
    return {
        "attributes": attributes,
        "capacity": _quantities(device.get("capacity") or {}),
        "consumesCounters": {c["counterSet"]: _quantities(c["counters"]) for c in device.get("consumesCounters") or []},
    }


@pytest.mark.parametrize("path", dumps(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_synthesized_devices_are_what_the_driver_publishes_on_real_hardware(fleet, path):
    real_devices, real_counters = read_dump(path)
    ours_devices, ours_counters = synthesized(fleet, path)
    real = {d["name"]: comparable(d) for d in real_devices}
    ours = {d["name"]: comparable(d) for d in ours_devices}
    assert sorted(ours) == sorted(real), "device names differ"
    differences = [f"{name}.{part}: gpuc {ours[name][part]} != real {real[name][part]}"
                   for name in sorted(real) for part in real[name] if ours[name][part] != real[name][part]]
    assert not differences, "\n".join(differences)
    assert {n: _quantities(c) for n, c in ours_counters.items()} == {n: _quantities(c) for n, c in real_counters.items()}


def test_every_hardware_dump_is_a_case():
    """A new dump is a new case by its file name alone; a name the test cannot map is an error, not a skip."""
    for path in dumps():
        match = DUMP_NAME.fullmatch(path.name)
        assert match and match["line"] in LINES and match["mode"] in MODES, path.name


def test_a_pool_without_declared_hosts_publishes_no_host_facts(fleet):
    """addressingMode and the NUMA node are the host's: without nodePools[].host gpuc publishes neither."""
    doc = cluster_doc(driver="0.5.0-dev", kubernetes="1.35", pools=[{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 2}}])
    listed = inventory_list(synthesize_for(compile_single(fleet(clusters=[doc]))))
    names = {n for s in listed["items"] if s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"] for n in d["attributes"]}
    assert "productName" in names
    assert not names & {"addressingMode", "resource.kubernetes.io/numaNode"}


@pytest.mark.parametrize("numa_nodes, expected", [(2, [0, 0, 1, 1]), (1, [0, 0, 0, 0]), (0, [None] * 4)])
def test_declared_hosts_publish_their_numa_nodes(fleet, numa_nodes, expected):
    doc = cluster_doc(driver="0.5.0-dev", kubernetes="1.35", pools=[
        {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 4}, "host": {"addressingMode": "HMM", "numaNodes": numa_nodes}}])
    listed = inventory_list(synthesize_for(compile_single(fleet(clusters=[doc]))))
    devices = [d for s in listed["items"] if s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"]]
    assert [d["attributes"].get("resource.kubernetes.io/numaNode", {}).get("int") for d in devices] == expected
    assert {d["attributes"]["addressingMode"]["string"] for d in devices} == {"HMM"}


def test_the_catalog_says_where_each_models_facts_come_from():
    """Every model sources its memory, every MIG model its MIG facts; `measured` is claimed exactly for the models
    a hardware dump covers, so a claim of measurement cannot outlive (or predate) the comparison above."""
    dumped = {model_of(read_dump(path)[0]) for path in dumps()}
    for key, model in gpu_models().items():
        groups = {group: kind for group, kind, _ in model.provenance.kinds}
        assert "memory" in groups, key
        assert ("mig" in groups) == (model.mig is not None), key
        assert all(source for _, _, source in model.provenance.kinds), key
        assert set(model.provenance.estimated) <= set(model.mig.profiles if model.mig else ()), key
        assert (groups.get("mig") == "measured") == (key in dumped), key


def test_gpuc_catalog_shows_the_provenance(tmp_path):
    from conftest import gpuc

    text = gpuc("catalog").out
    assert "facts: memory measured, MIG measured" in text.split("H100-80GB", 1)[1].split("\n  H200", 1)[0]
    assert "MIG observed (3g.90gb, 4g.90gb, 7g.180gb estimated)" in text
    data = json.loads(gpuc("catalog", "--output", "json").out)
    h200 = next(m for m in data["gpuModels"] if m["model"] == "H200-141GB")
    assert h200["provenance"]["mig"]["kind"] == "measured" and "hardware/h200" in h200["provenance"]["mig"]["source"]
