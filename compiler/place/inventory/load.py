"""A real inventory: the ResourceSlices of a running cluster (`kubectl get resourceslices -o yaml`, any
export `--state` reads, or a live read).

Slices come in whatever resource.k8s.io version the server serves. Each pool keeps only its newest
generation; a pool with fewer slices than its resourceSliceCount is incomplete and one that repeats
a device name across slices is invalid: both are reported (the scheduler uses incomplete pools for
ExactCount but refuses them for All, and refuses invalid pools). Malformed slices are errors naming
file, line and field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...cel import AttrList, Quantity, QuantityError, SemverError
from ...diagnostics import Diagnostic, InputError
from ...facts.driver import gpu_driver
from ...facts.platform import dra_gates
from ...load.state import ClusterState, StateObject, read_state
from ...load.state_shapes import HINTS
from ...validate.resolved import ResolvedCluster
from ...validate.types import DNS_LABEL
from .codec import NESTED_DEVICE_APIS, counter_use, decode_attribute, qualify
from .model import CounterUse, Device, Inventory, NodeInfo, RequestPolicy, ResourceSlice, build_inventory, natural_key

API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
GROUP = "resource.k8s.io"
NODE_SELECTION = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
EXPORT_HINT = "export the slices with `kubectl get resourceslices -o yaml > slices.yaml`"

Location = tuple[StateObject, tuple]  # (the slice, field path inside it)


class _Reader:
    """Walks plain values, collecting every problem with where it is."""

    def __init__(self, minor: int | None = None) -> None:
        self.problems: list[tuple[Location, str, str]] = []
        # list-typed attributes are refused on a cluster whose DRAListTypeAttributes gate is off (None: no cluster,
        # read them as the scheduler's allocator does whatever its gates)
        self.lists_off = minor if minor is not None and not dra_gates()["DRAListTypeAttributes"].on_by_default(minor) else None

    def fail(self, where: Location, message: str, hint: str = "") -> None:
        self.problems.append((where, message, hint))

    def get(self, value: dict, key: str, where: Location, kind: type | tuple, required: bool = True, what: str = "") -> Any:
        doc, path = where
        if key not in value or value[key] is None:
            if required:
                self.fail((doc, path + (key,)), f"required field '{key}' is missing" + (f" ({what})" if what else ""))
            return None
        found = value[key]
        if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            expected = {"dict": "a mapping", "list": "a list", "str": "a string", "int": "an integer", "bool": "true or false"}.get(names, names)
            self.fail((doc, path + (key,)), f"must be {expected}, got {type(found).__name__}")
            return None
        return found


def _quantity(reader: _Reader, raw: Any, where: Location) -> Quantity | None:
    value = raw.get("value") if isinstance(raw, dict) else None
    if value is None:
        reader.fail(where, "must be a mapping with a `value` quantity, e.g. {value: 80Gi}")
        return None
    try:
        return Quantity.parse(value)
    except QuantityError as exc:
        reader.fail((where[0], where[1] + ("value",)), str(exc))
        return None


def _counters(reader: _Reader, raw: Any, where: Location) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    if not isinstance(raw, dict):
        reader.fail(where, "must be a mapping of counter name to {value: quantity}")
        return out
    for name, value in raw.items():
        q = _quantity(reader, value, (where[0], where[1] + (name,)))
        if q is not None:
            out[str(name)] = q
    return out


def _mappings(reader: _Reader, raw: list, where: Location, refusal: str) -> Iterator[tuple[Location, dict]]:
    """(location, entry) of each mapping of a list; any other entry is refused at its index with `refusal`."""
    for i, entry in enumerate(raw):
        here = (where[0], where[1] + (i,))
        if isinstance(entry, dict):
            yield here, entry
        else:
            reader.fail(here, refusal)


def _consumes(reader: _Reader, raw: list, where: Location) -> tuple[CounterUse, ...]:
    out = []
    for here, entry in _mappings(reader, raw, where, "must be a mapping with counterSet and counters"):
        name = reader.get(entry, "counterSet", here, str)
        counters = _counters(reader, entry.get("counters"), (here[0], here[1] + ("counters",)))
        groups = reader.get(entry, "compatibilityGroups", here, list, required=False) or []
        if not all(isinstance(g, str) and g for g in groups):
            reader.fail((here[0], here[1] + ("compatibilityGroups",)), "compatibility groups are non-empty strings")
        elif name:
            out.append(counter_use(name, counters, tuple(groups)))
    return tuple(out)


def _device(reader: _Reader, raw: Any, where: Location, driver: str, api: str) -> Device | None:
    doc, path = where
    if not isinstance(raw, dict):
        reader.fail(where, "a device must be a mapping with a name")
        return None
    name = reader.get(raw, "name", where, str)
    if name is not None and not DNS_LABEL.match(name):
        reader.fail((doc, path + ("name",)), f"device name '{name}' is not a DNS label")
    nested = api in NESTED_DEVICE_APIS
    if nested:
        body = reader.get(raw, "basic", where, dict, what=f"{api} keeps device fields under `basic`") or {}
        base = path + ("basic",)
    else:
        if "basic" in raw:
            reader.fail((doc, path + ("basic",)), f"`basic` is the resource.k8s.io/v1beta1 device shape; this slice is {api}",
                        "move attributes and capacity up onto the device, or fix the apiVersion")
        body, base = raw, path
    attributes: dict[str, dict[str, Any]] = {}
    for key, value in (reader.get(body, "attributes", (doc, base), dict, required=False) or {}).items():
        try:
            domain, ident = qualify(str(key), driver)
            attributes.setdefault(domain, {})[ident] = decoded = decode_attribute(value)
        except (ValueError, SemverError) as exc:
            reader.fail((doc, base + ("attributes", key)), str(exc), HINTS["attributes"])
            continue
        if isinstance(decoded, AttrList) and reader.lists_off is not None:
            reader.fail((doc, base + ("attributes", key)), f"a list-typed attribute ({decoded.kind}) needs the "
                        f"DRAListTypeAttributes feature gate, off by default on Kubernetes 1.{reader.lists_off}",
                        "the DRA driver and the cluster must agree on the gate: turn the driver's DRAListTypeAttributes "
                        "gate off (it then publishes single values), or target a cluster version whose gate is on")
    capacity: dict[str, dict[str, Quantity]] = {}
    policies: dict[str, dict[str, RequestPolicy]] = {}
    for key, value in (reader.get(body, "capacity", (doc, base), dict, required=False) or {}).items():
        q = _quantity(reader, value, (doc, base + ("capacity", key)))
        if q is not None:
            domain, ident = qualify(str(key), driver)
            capacity.setdefault(domain, {})[ident] = q
            if isinstance(value, dict) and value.get("requestPolicy") is not None:
                policy = _policy(reader, value["requestPolicy"], (doc, base + ("capacity", key, "requestPolicy")))
                if policy is not None:
                    policies.setdefault(domain, {})[ident] = policy
    consumes = _consumes(reader, reader.get(body, "consumesCounters", (doc, base), list, required=False) or [],
                         (doc, base + ("consumesCounters",)))
    if name is None:
        return None
    multi = reader.get(body, "allowMultipleAllocations", (doc, base), bool, required=False) is True
    return Device(name, driver, attributes, capacity, consumes, binding_conditions=bool(body.get("bindingConditions")),
                  node_name=body.get("nodeName") if isinstance(body.get("nodeName"), str) else None,
                  all_nodes=body.get("allNodes") is True, multi=multi, policies=policies or None,
                  node_selector=body.get("nodeSelector") if isinstance(body.get("nodeSelector"), dict) else None,
                  taints=_taints(reader, reader.get(body, "taints", (doc, base), list, required=False) or [], (doc, base + ("taints",))))


def _taints(reader: _Reader, raw: list, where: Location) -> tuple[tuple[str, str, str], ...]:
    """A device's taints as (key, value, effect); the scheduler only honours them with DRADeviceTaints on."""
    out = []
    for here, taint in _mappings(reader, raw, where, "a taint must be a mapping with key and effect"):
        key, effect = reader.get(taint, "key", here, str), reader.get(taint, "effect", here, str)
        if key is not None and effect is not None:
            out.append((key, str(taint.get("value") or ""), effect))
    return tuple(out)


def _policy(reader: _Reader, raw: Any, where: Location) -> RequestPolicy | None:
    """A capacity's requestPolicy: {default, validRange: {min, max, step}} or {default, validValues}."""
    if not isinstance(raw, dict):
        reader.fail(where, "must be a mapping (default, validRange or validValues)")
        return None
    doc, path = where

    def amount(value: Any, at: tuple) -> Quantity | None:
        if value is None:
            return None
        try:
            return Quantity.parse(value)
        except QuantityError as exc:
            reader.fail((doc, path + at), str(exc))
            return None

    bounds: dict = raw["validRange"] if isinstance(raw.get("validRange"), dict) else {}
    values: list = raw["validValues"] if isinstance(raw.get("validValues"), list) else []
    return RequestPolicy(default=amount(raw.get("default"), ("default",)),
                         minimum=amount(bounds.get("min"), ("validRange", "min")),
                         maximum=amount(bounds.get("max"), ("validRange", "max")),
                         step=amount(bounds.get("step"), ("validRange", "step")),
                         valid_values=tuple(q for i, v in enumerate(values) if (q := amount(v, ("validValues", i))) is not None))


def _line(obj: StateObject, path: tuple) -> int:
    return obj.file.line((obj.where[0], obj.where[1] + path)) if obj.file is not None else 0


def _slice(reader: _Reader, obj: StateObject) -> ResourceSlice | None:
    raw = obj.raw
    where: Location = (obj, ())
    doc, path = where
    api = raw.get("apiVersion")
    if api not in API_VERSIONS:
        reader.fail((doc, path + ("apiVersion",)), f"apiVersion {api!r} is not a resource.k8s.io version with "
                    f"structured parameters ({', '.join(API_VERSIONS)})")
        return None
    metadata = reader.get(raw, "metadata", where, dict) or {}
    name = reader.get(metadata, "name", (doc, path + ("metadata",)), str)
    spec = reader.get(raw, "spec", where, dict)
    if spec is None:
        return None
    here = (doc, path + ("spec",))
    driver = reader.get(spec, "driver", here, str)
    pool = reader.get(spec, "pool", here, dict) or {}
    pool_where = (doc, here[1] + ("pool",))
    pool_name = reader.get(pool, "name", pool_where, str)
    generation = reader.get(pool, "generation", pool_where, int)
    count = reader.get(pool, "resourceSliceCount", pool_where, int)
    if isinstance(count, int) and count < 1:
        reader.fail((doc, pool_where[1] + ("resourceSliceCount",)), "must be at least 1")
    chosen = [k for k in NODE_SELECTION if spec.get(k) not in (None, False)]
    if len(chosen) != 1:
        reader.fail(here, f"exactly one of {', '.join(NODE_SELECTION)} must be set, found {', '.join(chosen) or 'none'}")
    devices: list[Device] = []
    seen: dict[str, int] = {}
    for i, raw_device in enumerate(reader.get(spec, "devices", here, list, required=False) or []):
        device = _device(reader, raw_device, (doc, here[1] + ("devices", i)), driver or "", api)
        if device is None:
            continue
        if device.name in seen:
            first = _line(obj, here[1] + ("devices", seen[device.name], "name"))
            reader.fail((doc, here[1] + ("devices", i, "name")), f"duplicate device name '{device.name}' in slice {name} "
                        f"(first at line {first})", "device names are unique within a pool; re-export the slices")
        seen.setdefault(device.name, i)
        devices.append(device)
    shared: dict[str, dict[str, Quantity]] = {}
    for i, entry in enumerate(reader.get(spec, "sharedCounters", here, list, required=False) or []):
        set_where = (doc, here[1] + ("sharedCounters", i))
        set_name = reader.get(entry, "name", set_where, str) if isinstance(entry, dict) else None
        if set_name:
            shared[set_name] = _counters(reader, entry.get("counters"), (doc, set_where[1] + ("counters",)))
    if None in (name, driver, pool_name, generation, count):
        return None
    node_selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else None
    skip = reader.get(spec, "skipNodeOperations", here, list, required=False) or []
    if not all(isinstance(op, str) and op for op in skip):
        reader.fail((doc, here[1] + ("skipNodeOperations",)), "node operations are non-empty strings (\"*\", NodePrepareResources, ...)")
    return ResourceSlice(name, driver, pool_name, generation, count, devices,
                         node_name=spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None,
                         all_nodes=spec.get("allNodes") is True, node_selector=node_selector,
                         per_device_node_selection=spec.get("perDeviceNodeSelection") is True,
                         shared_counters=shared, skip_node_operations=tuple(str(op) for op in skip))


def node_pool(name: str, cluster: ResolvedCluster, products: set[str]) -> str | None:
    """The node pool a node of the exported slices belongs to: listed in nodeNames, named <pool>-<i>, or
    else the one pool whose GPU model the node's devices report (productName)."""
    for pool in cluster.pools:
        if pool.spec.node_names and name in pool.spec.node_names:
            return pool.name
    for pool in cluster.pools:
        if not pool.spec.node_names and re.fullmatch(re.escape(pool.name) + r"-\d+", name):
            return pool.name
    by_product = [p for p in cluster.pools if not p.spec.node_names and p.gpu.product_name in products]
    return by_product[0].name if len(by_product) == 1 and len(products) == 1 else None


def _nodes(slices: list[ResourceSlice], cluster: ResolvedCluster, labels: dict[str, dict[str, str]]) -> list[NodeInfo]:
    products: dict[str, set[str]] = {}
    driver = gpu_driver()
    for s in slices:
        for d in s.devices:
            node = d.node_name or s.node_name
            product = d.attributes.get(driver, {}).get("productName") if d.driver == driver else None
            if node:
                found = products.setdefault(node, set())
                if isinstance(product, str):
                    found.add(product)
    order = {p.name: i for i, p in enumerate(cluster.pools)}
    by_name = {p.name: p for p in cluster.pools}
    nodes = []
    for name, found in products.items():
        pool = node_pool(name, cluster, found)
        mates = cluster.node_mates(by_name[pool]) if pool in by_name else ()
        merged = {k: v for p in mates or [None] for k, v in labels.get(p.name if p else pool or "", {}).items()}
        nodes.append(NodeInfo(name, pool, tuple(sorted(merged.items())), tuple(p.name for p in mates if p.name != pool)))
    return sorted(nodes, key=lambda n: (order.get(n.pool or "", len(order)), natural_key(n.name)))


Locate = Callable[..., Diagnostic]  # (slice, message, hint, path inside the slice=()) -> warning


def _pool_warnings(inventory: Inventory, slices: list[ResourceSlice], locate: Locate) -> list[Diagnostic]:
    first: dict[tuple[str, str], ResourceSlice] = {}
    for s in inventory.slices:  # the current generation: a stale slice is not where the pool's state shows
        if s.generation == inventory.pools[(s.driver, s.pool)].generation:
            first.setdefault((s.driver, s.pool), s)
    out = []
    stale = [s for s in slices if s.generation < inventory.pools[(s.driver, s.pool)].generation]
    for key, pool in inventory.pools.items():
        s = first[key]
        if pool.incomplete:
            out.append(locate(s, f"resource pool {pool.driver}/{pool.name} is incomplete: {pool.slices} of {pool.expected} "
                                 f"slices at generation {pool.generation}",
                              "the driver may still be publishing: from Kubernetes 1.35 the scheduler allocates none of its devices "
                              "until every slice is there (before, only allocationMode All waits); re-export once it is"))
        if pool.invalid:
            out.append(locate(s, f"resource pool {pool.driver}/{pool.name} is invalid: device '{pool.duplicate}' appears in "
                                 "more than one of its slices", "the scheduler refuses to allocate from an invalid pool"))
    out.extend(_undefined_counter_sets(inventory, locate))
    for s in stale:
        newer = inventory.pools[(s.driver, s.pool)].generation
        if s.node_name is not None and (s.driver, s.pool, s.node_name) in inventory.views:
            out.append(locate(s, f"slice {s.name} belongs to generation {s.generation} of pool {s.driver}/{s.pool}, which "
                                 f"is complete on node {s.node_name} while generation {newer} is on other nodes",
                              "the scheduler still allocates its devices on that node until the driver deletes the old "
                              "slices, as gpuc does"))
            continue
        out.append(locate(s, f"slice {s.name} belongs to generation {s.generation} of pool {s.driver}/{s.pool}; "
                             f"generation {newer} replaces it", "ignored, as the scheduler does"))
    return out


def _undefined_counter_sets(inventory: Inventory, locate: Locate) -> list[Diagnostic]:
    """A device that consumes a counter set no current slice of its pool defines: the scheduler then does
    not limit it by those counters at all, so the device can be over-committed."""
    found: dict[tuple[tuple[str, str], str], list[tuple[ResourceSlice, int, str]]] = {}
    for s in inventory.slices:
        defined = inventory.counter_sets.get((s.driver, s.pool), {})
        for i, d in enumerate(s.devices):
            for use in d.consumes:
                if use.counter_set not in defined:
                    found.setdefault(((s.driver, s.pool), use.counter_set), []).append((s, i, d.name))
    out = []
    for ((driver, pool), counter_set), devices in found.items():
        s, i, name = devices[0]
        more = f" (and {len(devices) - 1} more device(s))" if len(devices) > 1 else ""
        out.append(locate(s, f"device '{name}'{more} of resource pool {driver}/{pool} consumes counter set "
                             f"'{counter_set}', which no slice of the pool defines at generation "
                             f"{inventory.pools[(driver, pool)].generation}",
                          "the scheduler then does not limit these devices by that counter set; export every slice of "
                          "the pool, including the one that holds its sharedCounters", ("spec", "devices", i)))
    return out


def load_slices(source: str | Path | ClusterState, cluster: ResolvedCluster,
                node_labels: dict[str, dict[str, str]] | None = None) -> Inventory:
    """The inventory the ResourceSlices of a cluster state describe (an export file, or a state already
    read); InputError (exit 2) on malformed slices or a state without any."""
    state = source if isinstance(source, ClusterState) else read_state([str(source)], "--slices")
    reader = _Reader(cluster.api.minor)
    objects = state.of(GROUP, "ResourceSlice")
    located: list[tuple[StateObject, ResourceSlice]] = []
    for obj in objects:
        s = _slice(reader, obj)
        if s is not None:
            located.append((obj, s))
    if not objects:
        kinds = sorted({o.kind for o in state.objects})
        raise InputError([Diagnostic(state.display, 0, "(ResourceSlices)",
                                     f"the cluster state holds no ResourceSlice{' (only ' + ', '.join(kinds) + ')' if kinds else ''}",
                                     EXPORT_HINT)])
    if reader.problems:
        raise InputError([w[0].diagnostic(m, h, path=w[1], cheap=False) for w, m, h in reader.problems])
    slices = [s for _, s in located]
    where_of = {id(s): obj for obj, s in located}
    inventory = build_inventory(cluster.name, state.display, _api(objects),
                                slices, _nodes(slices, cluster, node_labels or {}))

    def locate(s: ResourceSlice, message: str, hint: str, path: tuple = ()) -> Diagnostic:
        return where_of[id(s)].diagnostic(message, hint, severity="warning", path=path)

    warnings = _pool_warnings(inventory, slices, locate)
    strangers = [n.name for n in inventory.nodes if n.pool is None]
    if strangers:
        shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
        warnings.append(Diagnostic(state.display, 0, "(nodes)",
                                   f"{len(strangers)} node(s) belong to no node pool of cluster '{cluster.name}': {shown}",
                                   "list them in the pool's nodePools[].nodeNames (or name them <pool>-<i>) so their GPUs "
                                   "count towards that pool; a node whose GPUs report the product of exactly one pool "
                                   "without nodeNames is placed in it by itself", "warning"))
    inventory.warnings = tuple(warnings)
    return inventory


def _api(objects: list[StateObject]) -> str:
    return next((o.api_version for o in objects), API_VERSIONS[0])
