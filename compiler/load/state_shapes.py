"""The wire shape of the running cluster's objects that gpuc reads field by field, as typed models.

An export is checked against them as it is read, so that every later reader (placement, `status`, the
models a cluster publishes) may take the types as given: a ResourceSlice whose attributes are a list,
or whose device is a string, is a finding naming file, line and field here, never a crash further on.

Only the types are checked, and only of fields gpuc reads: which fields are required and what their
values mean (quantities, DNS names, one node selection) is the inventory loader's to say, with its
own messages. Unknown fields are kept: a newer API server adds some.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

Problem = tuple[tuple[str | int, ...], str, str]  # (field path inside the object, message, hint)


def _quantity(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
        raise ValueError(f"must be a quantity (a string such as 80Gi, or a number), got {_kind(value)}")
    return value


Quantity = Annotated[Any, AfterValidator(_quantity)]


class Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=False)


class Counter(Shape):
    value: Quantity = None


Counters = dict[StrictStr, Counter]


class NodeSelectorRequirement(Shape):
    key: StrictStr | None = None
    operator: StrictStr | None = None
    values: list[StrictStr] | None = None


class NodeSelectorTerm(Shape):
    match_expressions: list[NodeSelectorRequirement] | None = Field(None, alias="matchExpressions")
    match_fields: list[NodeSelectorRequirement] | None = Field(None, alias="matchFields")


class NodeSelector(Shape):
    node_selector_terms: list[NodeSelectorTerm] | None = Field(None, alias="nodeSelectorTerms")


class RequestPolicyRange(Shape):
    min: Quantity = None
    max: Quantity = None
    step: Quantity = None


class RequestPolicy(Shape):
    default: Quantity = None
    valid_range: RequestPolicyRange | None = Field(None, alias="validRange")
    valid_values: list[Quantity] | None = Field(None, alias="validValues")


class Capacity(Shape):
    value: Quantity = None
    request_policy: RequestPolicy | None = Field(None, alias="requestPolicy")


class CounterConsumption(Shape):
    counter_set: StrictStr | None = Field(None, alias="counterSet")
    counters: Counters | None = None
    compatibility_groups: list[StrictStr] | None = Field(None, alias="compatibilityGroups")


class Taint(Shape):
    key: StrictStr | None = None
    value: StrictStr | None = None
    effect: StrictStr | None = None


class DeviceFields(Shape):
    """What a device says of itself: on the device (v1, v1beta2) or under `basic` (v1beta1)."""

    # each a mapping holding one typed value: which type, and that the value is of it, the inventory loader says
    attributes: dict[StrictStr, dict[StrictStr, Any]] | None = None
    capacity: dict[StrictStr, Capacity] | None = None
    consumes_counters: list[CounterConsumption] | None = Field(None, alias="consumesCounters")
    node_name: StrictStr | None = Field(None, alias="nodeName")
    node_selector: NodeSelector | None = Field(None, alias="nodeSelector")
    all_nodes: StrictBool | None = Field(None, alias="allNodes")
    allow_multiple_allocations: StrictBool | None = Field(None, alias="allowMultipleAllocations")
    binding_conditions: list[StrictStr] | None = Field(None, alias="bindingConditions")
    taints: list[Taint] | None = None


class Device(DeviceFields):
    name: StrictStr | None = None
    basic: DeviceFields | None = None


class Pool(Shape):
    name: StrictStr | None = None
    generation: StrictInt | None = None
    resource_slice_count: StrictInt | None = Field(None, alias="resourceSliceCount")


class CounterSet(Shape):
    name: StrictStr | None = None
    counters: Counters | None = None


class SliceSpec(Shape):
    driver: StrictStr | None = None
    pool: Pool | None = None
    node_name: StrictStr | None = Field(None, alias="nodeName")
    node_selector: NodeSelector | None = Field(None, alias="nodeSelector")
    all_nodes: StrictBool | None = Field(None, alias="allNodes")
    per_device_node_selection: StrictBool | None = Field(None, alias="perDeviceNodeSelection")
    devices: list[Device] | None = None
    shared_counters: list[CounterSet] | None = Field(None, alias="sharedCounters")
    skip_node_operations: list[StrictStr] | None = Field(None, alias="skipNodeOperations")


class ResourceSlice(Shape):
    spec: SliceSpec | None = None


SHAPES: dict[tuple[str, str], type[Shape]] = {("resource.k8s.io", "ResourceSlice"): ResourceSlice}

# What the field nearest a mistake looks like, written as an export has it.
HINTS = {
    "attributes": "attributes map each name to one typed value, e.g. `productName: {string: NVIDIA H100 80GB HBM3}`, "
                  "`index: {int: 0}`, `driverVersion: {version: 580.82.7}`",
    "capacity": "capacity maps each name to a quantity, e.g. `memory: {value: 80Gi}`",
    "counters": "counters map each name to a quantity, e.g. `memory: {value: 80Gi}`",
    "consumesCounters": "consumesCounters is a list of `{counterSet: NAME, counters: {NAME: {value: QUANTITY}}}`",
    "sharedCounters": "sharedCounters is a list of `{name: NAME, counters: {NAME: {value: QUANTITY}}}`",
    "requestPolicy": "a requestPolicy is `{default: QUANTITY, validRange: {min, max, step}}` or `{default, validValues: [...]}`",
    "taints": "taints is a list of `{key: KEY, value: VALUE, effect: NoSchedule}`",
    "nodeSelector": "a NodeSelector is `{nodeSelectorTerms: [{matchExpressions: [{key, operator, values: [...]}]}]}`",
    "pool": "pool is `{name: NAME, generation: INTEGER, resourceSliceCount: INTEGER}`",
    "basic": "v1beta1 keeps a device's attributes and capacity under `basic: {...}`",
    "devices": "devices is a list of mappings, each with a name, attributes and capacity",
    "spec": "a ResourceSlice's spec is a mapping with driver, pool, a node selection and devices",
}
REEXPORT = "the API server always writes it so: fix the export, or export the cluster again with kubectl"
_EXPECTED = {"string_type": "a string", "int_type": "an integer", "bool_type": "true or false", "dict_type": "a mapping",
             "model_type": "a mapping", "model_attributes_type": "a mapping", "list_type": "a list"}


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", int: "an integer", bool: "a boolean", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _problem(error: Any) -> Problem:
    loc = tuple(error["loc"])
    kind, got = error["type"], error.get("input")
    if loc and loc[-1] == "[key]":  # a mapping's key (a YAML number, say), not its value
        loc = loc[:-1]
        message = f"a name here must be a string, got {_kind(got)} {got!r}"
    elif kind in _EXPECTED:
        message = f"must be {_EXPECTED[kind]}, got {_kind(got)}"
    elif kind == "value_error":
        message = str(error["msg"]).removeprefix("Value error, ")
    else:
        message = str(error["msg"])
    near = next((HINTS[p] for p in reversed(loc) if isinstance(p, str) and p in HINTS), "")
    return loc, message, f"{near}; {REEXPORT}" if near else REEXPORT


def shape_problems(group: str, kind: str, item: dict[str, Any]) -> list[Problem]:
    """Every field of `item` whose type is not the API's (none for kinds gpuc reads only loosely), one per field."""
    shape = SHAPES.get((group, kind))
    if shape is None:
        return []
    try:
        shape.model_validate(item)
    except ValidationError as exc:
        found: dict[tuple[str | int, ...], Problem] = {}
        for error in exc.errors():
            problem = _problem(error)
            found.setdefault(problem[0], problem)
        return list(found.values())
    return []
