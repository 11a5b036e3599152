"""Run one case of the upstream structured allocator's test table (tests/upstream_allocator/cases.json)
through gpuc's allocator, and say what each side decided.

A case is one `Allocate(node, claims)` call: slices, classes, devices already allocated, the claims,
the node, and the DRA feature gates on. Upstream's outcome is an error (the scheduler aborts), no
result (the claims do not fit the node) or one allocation per claim. gpuc gets the same inputs
through its own readers (the ResourceSlice loader, the claim and class parsers) and its planner,
restricted to the case's node, at the same feature set.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from compiler.cel import Quantity
from compiler.load.state import StateObject
from compiler.load.yaml_source import SourceDoc
from compiler.place.allocator import ClaimError, Pod, PodClaim, parse_claim_spec
from compiler.place.allocator.features import AllocatorFeatures
from compiler.place.allocator.planner import Planner
from compiler.place.allocator.requests import parse_device_class
from compiler.place.inventory import NodeInfo, build_inventory
from compiler.place.inventory.load import _Reader, _slice

CASES = Path(__file__).parent / "upstream_allocator" / "cases.json"
ORIGIN = SourceDoc("upstream-table", 0, {})

Outcome = tuple[str, Any]  # ("error", text) | ("unsatisfiable", None) | ("allocated", ((claim, ((request, driver, pool, device), ...)), ...))


@cache
def table() -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in json.loads(CASES.read_text())["cases"]}


def upstream(case: dict[str, Any]) -> Outcome:
    expect = case["expect"]
    if "error" in expect:
        return ("error", expect["error"])
    if not expect["results"]:
        return ("allocated", ()) if not case["claims"] else ("unsatisfiable", None)
    return ("allocated", tuple(
        (claim["metadata"]["name"], tuple((r["request"], r["driver"], r["pool"], r["device"]) for r in result["devices"].get("results", [])))
        for claim, result in zip(case["claims"], expect["results"])))


def gpuc(case: dict[str, Any]) -> Outcome:
    features = AllocatorFeatures.of(case["features"])
    reader = _Reader()
    slices = []
    for i, raw in enumerate(case["slices"]):
        s = _slice(reader, StateObject({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **raw}, None, (i, ())))
        if s is not None:
            slices.append(s)
    if reader.problems:
        return ("error", "; ".join(m for _, m, _ in reader.problems))
    node = case["node"]["metadata"] if case["node"] else {"name": "node-1", "labels": {"region": "region-1", "planet": "earth"}}
    declared = tuple((case["node"] or {}).get("status", {}).get("declaredFeatures") or ())
    info = NodeInfo(node["name"], None, tuple(sorted((node.get("labels") or {}).items())), declared=declared)
    inventory = build_inventory("upstream", "upstream-table", "resource.k8s.io/v1", slices, [info])
    classes = {}
    for manifest in case["classes"]:
        try:
            cls = parse_device_class(manifest)
        except ClaimError:
            continue
        classes[cls.name] = cls
    claims = []
    for raw in case["claims"]:
        name = raw["metadata"]["name"]
        try:
            spec = parse_claim_spec(raw["spec"], features)
            claims.append(PodClaim(name, "claim", f"ResourceClaim {name}", spec, False))
        except ClaimError as exc:
            claims.append(PodClaim(name, "claim", f"ResourceClaim {name}", None, False, str(exc)))
    planner = Planner(inventory, classes, features=features)
    by_name = {(inventory.slices[d.slice_index].driver, inventory.slices[d.slice_index].pool, d.name): d.index for d in inventory.devices}
    held: list[tuple[int, Any]] = []
    for text in case["allocatedDevices"]:
        index = by_name.get(tuple(text.split("/")))  # type: ignore[arg-type]
        if index is not None:
            held.append((index, None))
    for text in case["allocatedSharedDeviceIDs"]:
        index = by_name.get(tuple(text.split("/")[:3]))  # type: ignore[arg-type]
        if index is not None:
            held.append((index, {}))
    for text, consumed in case["allocatedCapacity"].items():
        index = by_name.get(tuple(text.split("/")))  # type: ignore[arg-type]
        device = inventory.devices[index] if index is not None else None
        if device is not None:
            taken = {}
            for key, value in consumed.items():
                domain, _, ident = key.rpartition("/")
                taken[(domain or device.driver, ident)] = Quantity.parse(value).value
            held.append((index, taken))
    planner.state.hold("allocated", held)
    if not claims:
        return ("allocated", ())
    outcome = planner.place(Pod("upstream/case", "case", 0, 0, tuple(claims), ORIGIN))
    if outcome.error:
        return ("error", outcome.reason)
    if not outcome.placed:
        return ("unsatisfiable", None)
    return ("allocated", tuple((c.claim, tuple((d.request, d.driver, d.pool, d.device) for d in c.devices)) for c in outcome.claims))


def agree(case: dict[str, Any]) -> tuple[bool, Outcome, Outcome]:
    """Whether gpuc decides as upstream: the same kind of outcome, and when allocated, the same devices per claim."""
    want, got = upstream(case), gpuc(case)
    if want[0] != got[0]:
        return False, want, got
    if want[0] == "allocated":
        return want[1] == got[1], want, got
    return True, want, got
