"""The ResourceSlice wire format of each resource.k8s.io version, in both directions.

v1beta1 nests a device's fields under `basic`; v1beta2 and v1 put them on the device. Attribute
values are one-of {string, int, bool, version} or, with DRAListTypeAttributes, a list of one of those
{ints, bools, strings, versions}; capacities and counters are {value: Quantity}.
Names of the driver's own domain are written without it, as the NVIDIA driver publishes them.
"""

from __future__ import annotations

from typing import Any

from ...cel import AttrList, Quantity, Semver
from ...cel.attrlist import LIST_KINDS
from .model import AttrValue, CounterUse, Device, RequestPolicy, ResourceSlice

NESTED_DEVICE_APIS = ("resource.k8s.io/v1beta1",)
ATTRIBUTE_TYPES = ("string", "int", "bool", "version")


def qualify(name: str, driver: str) -> tuple[str, str]:
    """`productName` of driver d -> (d, productName); `resource.kubernetes.io/pciBusID` keeps its domain."""
    domain, _, ident = name.rpartition("/")
    return (domain or driver), ident


def unqualify(domain: str, ident: str, driver: str) -> str:
    return ident if domain == driver else f"{domain}/{ident}"


def encode_attribute(value: AttrValue) -> dict[str, Any]:
    if isinstance(value, AttrList):
        return {value.kind: [str(v) if isinstance(v, Semver) else v for v in value.items]}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, Semver):
        return {"version": str(value)}
    return {"string": value}


def decode_attribute(raw: Any) -> AttrValue:
    """{string: x} | {int: n} | {bool: b} | {version: v}, or a list of one kind ({ints: [...]}, ...);
    ValueError says what is wrong."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError(f"an attribute value is a map with exactly one of {', '.join(ATTRIBUTE_TYPES + tuple(LIST_KINDS))}")
    (kind, value), = raw.items()
    if kind in LIST_KINDS:
        if not isinstance(value, list):
            raise ValueError(f"attribute of type {kind} has a {type(value).__name__} value {value!r}, not a list")
        return AttrList(kind, tuple(_scalar(LIST_KINDS[kind], v, f"an element of {kind}") for v in value))
    return _scalar(kind, value, f"attribute of type {kind}")


def _scalar(kind: str, value: Any, what: str) -> AttrValue:
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "version" and isinstance(value, str):
        return Semver.parse(value)
    if kind not in ATTRIBUTE_TYPES:
        raise ValueError(f"unknown attribute type '{kind}' (one of {', '.join(ATTRIBUTE_TYPES + tuple(LIST_KINDS))})")
    raise ValueError(f"{what} has a {type(value).__name__} value {value!r}")


def _counters(counters: dict[str, Quantity] | tuple[tuple[str, Quantity], ...]) -> dict[str, Any]:
    items = counters.items() if isinstance(counters, dict) else counters
    return {name: {"value": str(q)} for name, q in items}


def encode_device(device: Device, nested: bool) -> dict[str, Any]:
    body: dict[str, Any] = {}
    attributes = {unqualify(dom, ident, device.driver): encode_attribute(v)
                  for dom, values in device.attributes.items() for ident, v in values.items()}
    if attributes:
        body["attributes"] = dict(sorted(attributes.items()))
    policies = device.policies or {}
    capacity = {unqualify(dom, ident, device.driver): _capacity(q, policies.get(dom, {}).get(ident))
                for dom, values in device.capacity.items() for ident, q in values.items()}
    if capacity:
        body["capacity"] = dict(sorted(capacity.items()))
    if device.multi:
        body["allowMultipleAllocations"] = True
    if device.consumes:
        body["consumesCounters"] = [{"counterSet": c.counter_set, "counters": _counters(c.counters),
                                     **({"compatibilityGroups": list(c.groups)} if c.groups else {})} for c in device.consumes]
    if device.node_name:
        body["nodeName"] = device.node_name
    if device.all_nodes:
        body["allNodes"] = True
    return {"name": device.name, "basic": body} if nested else {"name": device.name, **body}


def _capacity(quantity: Quantity, policy: RequestPolicy | None) -> dict[str, Any]:
    out: dict[str, Any] = {"value": str(quantity)}
    if policy is not None:
        encoded: dict[str, Any] = {}
        if policy.default is not None:
            encoded["default"] = str(policy.default)
        bounds = {k: str(q) for k, q in (("min", policy.minimum), ("max", policy.maximum), ("step", policy.step)) if q is not None}
        if bounds:
            encoded["validRange"] = bounds
        if policy.valid_values:
            encoded["validValues"] = [str(q) for q in policy.valid_values]
        out["requestPolicy"] = encoded
    return out


def encode_slice(s: ResourceSlice, api_version: str, metadata: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": s.driver,
        "pool": {"name": s.pool, "generation": s.generation, "resourceSliceCount": s.slice_count},
    }
    if s.node_name:
        spec["nodeName"] = s.node_name
    elif s.all_nodes:
        spec["allNodes"] = True
    elif s.node_selector is not None:
        spec["nodeSelector"] = s.node_selector
    elif s.per_device_node_selection:
        spec["perDeviceNodeSelection"] = True
    nested = api_version in NESTED_DEVICE_APIS
    if s.devices or not s.shared_counters:  # 1.35 allows only one of devices and sharedCounters in a slice
        spec["devices"] = [encode_device(d, nested) for d in s.devices]
    if s.skip_node_operations:
        spec["skipNodeOperations"] = list(s.skip_node_operations)
    if s.shared_counters:
        spec["sharedCounters"] = [{"name": n, "counters": _counters(c)} for n, c in s.shared_counters.items()]
    return {"apiVersion": api_version, "kind": "ResourceSlice", "metadata": {"name": s.name, **metadata}, "spec": spec}


def counter_use(counter_set: str, counters: dict[str, Quantity], groups: tuple[str, ...] = ()) -> CounterUse:
    return CounterUse(counter_set, tuple(counters.items()), groups)


def inventory_list(inventory: Any, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The slices as one `v1 List`, the shape `kubectl get resourceslices -o yaml` prints and `kubectl apply` reads."""
    metadata = {"annotations": dict(annotations)} if annotations else {}
    items = [encode_slice(s, inventory.api_version, metadata) for s in inventory.slices]
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
