"""The benchmark generators write fleets gpuc accepts on today's platform matrix.

Every figure of benchmarks.run renders what benchmarks/fleetgen.py writes; when a new check refuses that, the
benchmarks stop at their first run. These tests render a small fleet of each generator and fail on any error or
on a warning the fleet does not acknowledge, and they fail when the facts gain a Kubernetes minor, a driver line,
an operator mode or a fabric mode the generator does not cover.
"""

from __future__ import annotations

import json
import typing
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from benchmarks.fleetgen import PLATFORMS, generate, generate_plan
from benchmarks.report_bench import worst_case_fleet
from compiler.facts import load_table
from compiler.facts.driver import driver_lines, parse_driver_version
from compiler.validate.intents import DraDriverSpec, GpuOperatorSpec

from conftest import gpuc


def _choices(model: type, field: str) -> set[str]:
    return set(typing.get_args(model.model_fields[field].annotation))


def test_platforms_cover_every_minor_driver_line_operator_mode_and_fabric_mode():
    assert {p.kubernetes for p in PLATFORMS} == set(load_table("kubernetes")["resourceApi"])
    assert {parse_driver_version(p.driver).id for p in PLATFORMS} == set(driver_lines())
    assert {p.operator for p in PLATFORMS} == _choices(GpuOperatorSpec, "mode")
    assert {p.fabric for p in PLATFORMS} == _choices(DraDriverSpec, "fabric")


def _render(fleet: Path, out: Path) -> dict:
    result = gpuc("render", fleet, "-o", out, "--output", "json")
    assert result.code == 0, result.out + result.err
    report = json.loads(result.out)
    assert report["warnings"] == []  # every warning a flavour gives by design is acknowledged
    return report


def _workloads(fleet: Path) -> list[dict]:
    return [doc for path in sorted((fleet / "workloads").rglob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())]


def _features(doc: dict) -> set[str]:
    spec, gpu = doc["spec"], doc["spec"]["gpu"]
    out = {key for key in ("mig", "multiNode", "fabric") if key in gpu} | ({"nim"} if "model" in spec else set())
    out.add(gpu.get("sharing", "Exclusive") if not out & {"mig", "multiNode", "nim"} else "other")
    if "fabric" in gpu and gpu["fabric"]["partitionSize"] > 1 and "multiNode" not in gpu and "model" not in spec:
        out.add("multi-GPU partition")
    return out


@pytest.mark.parametrize("spread", [1, 3])
def test_generated_fleet_renders_with_every_feature_its_platform_has(tmp_path, spread):
    fleet = tmp_path / "fleet"
    generate(fleet, clusters=len(PLATFORMS), workloads=40, nodes=2, seed=7, spread=spread)
    report = _render(fleet, tmp_path / "out")
    assert sorted(report["clusters"]) == [f"c{i:02d}" for i in range(len(PLATFORMS))]
    seen: dict[str, set[str]] = defaultdict(set)
    for doc in _workloads(fleet):
        seen[doc["spec"]["clusters"][0]] |= _features(doc)
    for i, p in enumerate(PLATFORMS):
        wanted = {"Exclusive", "Shared", "TimeSlicing", "multiNode"}
        wanted |= {"nim"} if p.nim else set()
        wanted |= {"MPS"} if p.mps else set()
        wanted |= {"mig"} if p.mig else set()
        wanted |= {"fabric"} if p.fabric != "none" else set()
        wanted |= {"multi-GPU partition"} if p.fabric == "partitionAttributes" else set()
        assert wanted <= seen[f"c{i:02d}"], (p, wanted - seen[f"c{i:02d}"])


def test_plan_fleet_renders_and_plans(tmp_path):
    fleet = tmp_path / "plan"
    generate_plan(fleet, nodes=40, pods=200, seed=7)
    _render(fleet, tmp_path / "out")
    result = gpuc("plan", fleet, "--output", "json")
    assert result.code == 0, result.out + result.err


def test_report_fleet_renders(tmp_path):
    _render(worst_case_fleet(tmp_path / "report", nodes=40), tmp_path / "out")
