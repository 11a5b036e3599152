"""Why a pod cannot be placed, in terms a user can act on.

Checked in the order a user would fix things: a request no device matches (which selector cut the
candidates to zero, and what the devices have instead), matching devices spread too thin or
already allocated, a matchAttribute constraint no GPU or partition can meet with free devices
(a MIG mix, an NVLink partition), exhausted shared counters, and finally claims that fit one by
one but not together on any node.
"""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction
from typing import Any

from ...cel import CelCompileError, CelEvaluationError, Quantity, Semver, compile_selector
from ...facts.driver import gpu_driver
from ..inventory import Device
from .candidates import DeviceIndex
from .pods import PodClaim
from .requests import ALL, ClaimError, Constraint, Option, Request
from .search import typed_value
from .state import AllocationState

GPU_DOMAIN = gpu_driver()
_BINARY_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_PRETTY = (
    (re.compile(r"device\.(attributes|capacity)\['gpu\.nvidia\.com'\]\.(\w+)"), r"\2"),
    (re.compile(r"device\.(attributes|capacity)\['([^']+)'\]\.(\w+)"), r"\2/\3"),
    (re.compile(r"([\w./]+)\.compareTo\((?:quantity|semver)\('([^']*)'\)\) (>=|<=|>|<|==|!=) 0"), r"\1 \3 \2"),
    (re.compile(r"([\w./]+)\.isGreaterThan\((?:quantity|semver)\('([^']*)'\)\)"), r"\1 > \2"),
    (re.compile(r"([\w./]+)\.isLessThan\((?:quantity|semver)\('([^']*)'\)\)"), r"\1 < \2"),
)


def pretty(expression: str) -> str:
    """A selector as a reader says it: `memory >= 100Gi` for the capacity compareTo form."""
    for pattern, replacement in _PRETTY:
        expression = pattern.sub(replacement, expression)
    return expression


def human(value: Any) -> str:
    if isinstance(value, Quantity) and value.format == "BinarySI":
        magnitude = abs(Fraction(value.value))
        for unit, size in _BINARY_UNITS:
            if magnitude >= size:
                return f"{float(value.value) / size:.1f}".removesuffix(".0") + unit
    return str(value)


def _devices(n: int, adjective: str = "") -> str:
    return f"{n} {adjective}device" + ("" if n == 1 else "s")


def _need(option: Option) -> int:
    return option.count if option.mode != ALL else 1


def _counts(index: DeviceIndex, state: AllocationState, option: Option, nodes: list[str]) -> tuple[Counter, Counter]:
    """Per node of `nodes`: how many devices the option selects, and how many of those are free."""
    match = index.match(option)
    if match.floating:  # node-independent devices: ask node by node
        return (Counter({n: len(index.candidates(option, n)) for n in nodes}),
                Counter({n: len(_free(index, state, option, n)) for n in nodes}))
    scope = set(nodes)
    node_of, in_use = index.node_of, state.in_use
    per_node = Counter(node_of[d] for d in match.devices if node_of[d] in scope)
    free = Counter(node_of[d] for d in match.devices if node_of[d] in scope and (option.admin_access or not in_use[d]))
    return per_node, free


def _free(index: DeviceIndex, state: AllocationState, option: Option, node: str) -> list[int]:
    candidates = index.candidates(option, node)
    return list(candidates) if option.admin_access else [d for d in candidates if not state.in_use[d]]


def values_hint(text: str, devices: list[Device]) -> str:
    """What `devices` have for the one attribute or capacity a selector reads: "; largest is 79.6Gi"."""
    refs = [r for r in compile_selector(text).analysis.refs if r.field in ("attributes", "capacity") and r.name]
    if len(refs) != 1:
        return ""
    ref = refs[0]
    values = []
    for device in devices:
        source = device.attributes if ref.field == "attributes" else device.capacity
        value = source.get(ref.domain, {}).get(ref.name)  # type: ignore[arg-type]
        if value is not None:
            values.append(value)
    label = ref.name if ref.domain == GPU_DOMAIN else str(ref)
    if not values:
        return f"; no device has {label}"
    quantities = [v for v in values if isinstance(v, Quantity)]
    if len(quantities) == len(values):
        return f"; largest is {human(max(quantities, key=lambda q: q.value))}"
    versions = [v for v in values if isinstance(v, Semver)]
    if len(versions) == len(values):
        best = versions[0]
        for v in versions:
            best = v if v.compare(best) > 0 else best
        return f"; highest is {best}"
    counts = Counter(str(v) for v in values)
    shown = ", ".join(f"{v} ({n})" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
    return f"; devices have {label} {shown}" + (", ..." if len(counts) > 4 else "")


def _culprit(texts: tuple[str, ...], base: list[int], index: DeviceIndex) -> str:
    """Which selector leaves no device, and what the devices have instead."""
    devices = index.inventory.devices
    for text in texts:
        try:
            selector = compile_selector(text)
        except CelCompileError as exc:
            return f"selector `{text}` does not compile: {exc}"
        hits = 0
        for i in base:
            try:
                hits += selector.matches(devices[i])
            except CelEvaluationError:
                pass
        if hits == 0:
            return f"selector {pretty(text)} matched 0 of {len(base)} devices" + values_hint(text, [devices[i] for i in base])
    return f"selectors {' && '.join(pretty(t) for t in texts)} together matched 0 of {len(base)} devices"


def _option_problem(who: str, option: Option, nodes: list[str], index: DeviceIndex, state: AllocationState) -> str:
    what = f"request '{option.name}' of {who}"
    base, _ = index.class_match(option.device_class)
    match = index.match(option)
    need = _need(option)
    if not base:
        cls = index.classes[option.device_class]
        everything = list(range(len(index.inventory.devices)))
        return f"{what}: DeviceClass '{option.device_class}' " + _culprit(cls.selectors, everything, index).replace("selector", "has selector", 1)
    if not match.devices:
        return f"{what}: " + _culprit(option.selectors, base, index)
    per_node, free = _counts(index, state, option, nodes)
    best = max(per_node.values(), default=0)
    if best < need:
        return (f"{what} needs {_devices(need)} on one node, but the {len(match.devices)} matching devices are at most "
                f"{best} per node")
    if option.mode == ALL:
        whole = [n for n in nodes if per_node[n] and free[n] == per_node[n]]
        return "" if whole else f"{what} asks for all matching devices of a node, and every node that has some has one in use"
    top = max(free.values(), default=0)
    if top < need:
        used = sum(1 for d in match.devices if state.in_use[d])
        where = f" ({max(free, key=lambda n: (free[n], n))})" if top else ""
        return (f"{what} needs {_devices(need, 'free ')} on one node: {len(match.devices)} match, {used} "
                f"{'is' if used == 1 else 'are'} allocated{_held_by(match.devices, state)}, "
                f"at most {top} free on one node{where}")
    return ""


def _held_by(devices: list[int] | tuple[int, ...], state: AllocationState) -> str:
    """" (5 by claims already in the cluster: ns/a, ns/b; 3 by earlier pods of ns/c)": who holds them."""
    parts = []
    for who, holding in (("claims already in the cluster: ", state.holders), ("earlier pods of ", state.placed)):
        holders = Counter(holding[d] for d in devices if d in holding)
        if holders:
            names = sorted(holders, key=lambda c: (-holders[c], c))
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"{sum(holders.values())} by {who}{shown}")
    return f" ({'; '.join(parts)})" if parts else ""


def _request_problem(who: str, request: Request, nodes: list[str], index: DeviceIndex, state: AllocationState) -> str:
    problems = [_option_problem(who, o, nodes, index, state) for o in request.options]
    if any(not p for p in problems):
        return ""
    if len(problems) == 1:
        return problems[0]
    return f"request '{request.name}' of {who}: none of its firstAvailable alternatives fits: " + "; ".join(problems)


def _label(request: Request, index: DeviceIndex) -> str:
    option = request.options[0]
    profiles = {index.inventory.devices[d].attributes.get(GPU_DOMAIN, {}).get("profile") for d in index.match(option).devices}
    name = next(iter(profiles)) if len(profiles) == 1 and None not in profiles else f"'{request.name}'"
    return f"{option.count}x {name}" if option.count > 1 else str(name)


def _constraint_problem(who: str, claim: PodClaim, constraint: Constraint, nodes: list[str], index: DeviceIndex,
                        state: AllocationState) -> str:
    requests = [r for r in claim.spec.requests if any(constraint.applies(o.name) for o in r.options)]  # type: ignore[union-attr]
    # (node, value) -> free devices per request, and all distinct ones: requests of one class see the same
    # devices, so each request having enough is not enough, they need that many different devices together.
    groups: dict[tuple, tuple[Counter, set[int]]] = {}
    for request in requests:
        option = request.options[0]
        for node in nodes:
            for d in _free(index, state, option, node):
                value = index.inventory.devices[d].attribute(constraint.attribute)
                if value is not None:
                    counts, devices = groups.setdefault((node, typed_value(value)), (Counter(), set()))
                    counts[request.name] += 1
                    devices.add(d)
    needs = {r.name: _need(r.options[0]) for r in requests}
    total = sum(needs.values())
    if any(_holds(g, needs, total) for g in groups.values()):
        return ""
    mix = " + ".join(_label(r, index) for r in requests)
    closest = max(groups.items(), key=lambda kv: (sum(kv[1][0][n] >= c for n, c in needs.items()), len(kv[1][1]), kv[0][0]),
                  default=None)
    hint = ""
    if closest is not None:
        (node, (_, value)), (counts, devices) = closest
        missing = [_label(r, index) for r in requests if counts[r.name] < needs[r.name]]
        hint = (f" (closest: one on {node} lacks {', '.join(missing)})" if missing else
                f" (closest: {node} has {_devices(len(devices), 'free ')} with {constraint.attribute} = {value}, {total} needed)")
    attribute = constraint.attribute
    if attribute.endswith("/parentUUID"):
        return f"MIG mix of {who} needs {mix} on one GPU: no GPU has all of them free{hint}"
    if re.search(r"/partition\d+$", attribute):
        return f"{who} needs {total} GPUs in one NVLink partition ({attribute}): no partition has {total} free{hint}"
    return f"requests {mix} of {who} must share {attribute}: no value of it has {total} free devices on one node{hint}"


def _holds(group: tuple[Counter, set[int]], needs: dict[str, int], total: int) -> bool:
    """Every request has enough devices with this value, and together they have enough distinct ones."""
    counts, devices = group
    return all(counts[name] >= n for name, n in needs.items()) and len(devices) >= total


def explain(who: str, claims: list[PodClaim], nodes: list[str], index: DeviceIndex, state: AllocationState) -> str:
    """The most actionable reason why `claims` fit on none of `nodes` together."""
    try:
        problems = [p for c in claims for r in c.spec.requests if (p := _request_problem(who, r, nodes, index, state))]  # type: ignore[union-attr]
        if problems:
            return "; ".join(problems)
        for claim in claims:
            for constraint in claim.spec.constraints:  # type: ignore[union-attr]
                problem = _constraint_problem(who, claim, constraint, nodes, index, state)
                if problem:
                    return problem
        counted = any(index.inventory.devices[d].consumes for c in claims for r in c.spec.requests  # type: ignore[union-attr]
                      for o in r.options for d in index.match(o).devices)
        if counted:
            return (f"{who}: no GPU has enough unallocated capacity left (the driver's shared counters: a MIG placement "
                    "cannot overlap the memory slices or engines of another allocation on the same GPU)")
    except ClaimError as exc:
        return str(exc)
    parts = ", ".join(f"{c.label}: {c.spec.min_devices}" for c in claims)  # type: ignore[union-attr]
    return f"{who}'s claims together ({parts} devices) fit on no single node with the devices still free"
