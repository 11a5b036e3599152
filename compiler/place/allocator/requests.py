"""Claims and DeviceClasses as the allocator reads them, parsed from manifests of any resource.k8s.io version.

v1beta1 writes a request's fields on the request itself; v1beta2 and v1 put them under `exactly`
or list alternatives under `firstAvailable`. Both parse into the same typed records. Capacity
requests (consumable capacity), request tolerations and distinctAttribute constraints are parsed. A field whose
feature gate is off (AllocatorFeatures) is refused with the error the scheduler's allocator gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...cel import Quantity, QuantityError
from ...facts.platform import dra_limits
from .features import ALL as ALL_FEATURES
from .features import AllocatorFeatures

EXACT_COUNT, ALL = "ExactCount", "All"


class ClaimError(ValueError):
    """A claim or class the allocator cannot use (the scheduler would report an error, not a Pending pod)."""


@dataclass(frozen=True)
class Option:
    """One way to satisfy a request: the request itself (`exactly`) or one of its `firstAvailable` subrequests."""

    name: str  # "gpu", or "gpu/large" for a subrequest
    device_class: str
    selectors: tuple[str, ...]
    mode: str  # ExactCount | All
    count: int  # 0 for All
    admin_access: bool = False
    capacity: tuple[tuple[str, Quantity], ...] = ()  # capacity.requests: name (unqualified: the device's driver) -> amount
    tolerations: tuple[Toleration, ...] = ()
    # derivedAttributes (DRADerivedAttributes): (fully qualified name, CEL expression) evaluated on each device
    # picked for this option; constraints read the value instead of the device's own attribute of that name
    derived: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Toleration:
    """A request's toleration of device taints (DRADeviceTaints), as resourceclaim.ToleratesTaint reads it."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: tuple[str, str, str]) -> bool:
        key, value, effect = taint
        if (self.effect and self.effect != effect) or (self.key and self.key != key):
            return False
        if self.operator in ("", "Equal"):
            return self.value == value
        return self.operator == "Exists"


@dataclass(frozen=True)
class Request:
    name: str
    options: tuple[Option, ...]  # `exactly` is one option; `firstAvailable` lists several, tried in order

    @property
    def min_devices(self) -> int:
        return min(o.count if o.mode == EXACT_COUNT else 1 for o in self.options)


@dataclass(frozen=True)
class Constraint:
    """matchAttribute: every device of the listed requests (all when empty) has the same value of `attribute`;
    distinctAttribute (`distinct`): no two of them have the same value."""

    attribute: str  # fully qualified: domain/name
    requests: frozenset[str] = frozenset()
    distinct: bool = False

    def applies(self, option_name: str) -> bool:
        return not self.requests or option_name in self.requests or option_name.split("/")[0] in self.requests


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...] = ()

    @property
    def min_devices(self) -> int:
        return sum(r.min_devices for r in self.requests)


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ClaimError(f"{where} must be a mapping")
    return value


def _items(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ClaimError(f"{where} must be a list")
    return value


def _selectors(raw: Any, where: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(_items(raw, f"{where}.selectors")):
        cel = s.get("cel") if isinstance(s, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if not isinstance(expression, str):
            raise ClaimError(f"{where}.selectors[{i}] has no cel.expression")
        out.append(expression)
    return tuple(out)


def _option(name: str, body: Any, where: str, allow_admin: bool, features: AllocatorFeatures) -> Option:
    body = _mapping(body, where)
    capacity = _capacity(body.get("capacity"), f"{where}.capacity")
    if capacity and not features.on("DRAConsumableCapacity"):
        raise ClaimError(f"{where}.capacity: has capacity requests, but the DRAConsumableCapacity feature is disabled")
    device_class = body.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise ClaimError(f"{where}.deviceClassName is required")
    mode = body.get("allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ClaimError(f"{where}.allocationMode {mode!r} is not ExactCount or All")
    count = 0 if mode == ALL else body.get("count") or 1  # the allocator ignores a count beside All
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ClaimError(f"{where}.count must be a positive integer")
    admin = body.get("adminAccess") is True
    if admin and not allow_admin:
        raise ClaimError(f"{where}.adminAccess is not allowed on a firstAvailable subrequest")
    if admin and not features.on("DRAAdminAccess"):
        raise ClaimError(f"{where}.adminAccess: admin access is requested, but the feature is disabled")
    tolerations = tuple(_toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(_items(body.get("tolerations"), f"{where}.tolerations")))
    derived = _derived(body.get("derivedAttributes"), f"{where}.derivedAttributes", features)
    return Option(name, device_class, _selectors(body.get("selectors"), where), mode, count, admin, capacity, tolerations, derived)


def _derived(raw: Any, where: str, features: AllocatorFeatures) -> tuple[tuple[str, str], ...]:
    out = []
    for i, entry in enumerate(_items(raw, where)):
        entry = _mapping(entry, f"{where}[{i}]")
        name, expression = entry.get("name"), entry.get("expression")
        if not isinstance(name, str) or "/" not in name:
            raise ClaimError(f"{where}[{i}].name must be a fully qualified attribute name (domain/name)")
        if not isinstance(expression, str) or not expression:
            raise ClaimError(f"{where}[{i}].expression must be a CEL expression")
        out.append((name, expression))
    if out and not features.on("DRADerivedAttributes"):
        raise ClaimError(f"{where}: has derived attributes, but the DRADerivedAttributes feature is disabled")
    return tuple(out)


def _toleration(raw: Any, where: str) -> Toleration:
    raw = _mapping(raw, where)
    return Toleration(str(raw.get("key") or ""), str(raw.get("operator") or "Equal"), str(raw.get("value") or ""),
                      str(raw.get("effect") or ""))


def _capacity(raw: Any, where: str) -> tuple[tuple[str, Quantity], ...]:
    if raw is None:
        return ()
    requests = _mapping(_mapping(raw, where).get("requests") or {}, f"{where}.requests")
    out = []
    for name, value in sorted(requests.items()):
        try:
            out.append((str(name), Quantity.parse(value)))
        except QuantityError as exc:
            raise ClaimError(f"{where}.requests.{name}: {exc}") from None
    return tuple(out)


def _request(raw: Any, where: str, features: AllocatorFeatures) -> Request:
    raw = _mapping(raw, where)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ClaimError(f"{where}.name is required")
    alternatives = _items(raw.get("firstAvailable"), f"{where}.firstAvailable")
    if alternatives and (raw.get("exactly") is not None or raw.get("deviceClassName") is not None):
        raise ClaimError(f"{where} has both an exact request and firstAvailable; the API server requires exactly one")
    if alternatives:
        if not features.on("DRAPrioritizedList"):
            raise ClaimError(f"{where}.firstAvailable: has subrequests, but the DRAPrioritizedList feature is disabled")
        options = tuple(_option(f"{name}/{_mapping(sub, f'{where}.firstAvailable[{i}]').get('name')}", sub,
                                f"{where}.firstAvailable[{i}]", False, features) for i, sub in enumerate(alternatives))
        return Request(name, options)
    if "exactly" in raw:
        return Request(name, (_option(name, raw["exactly"], where + ".exactly", True, features),))
    return Request(name, (_option(name, raw, where, True, features),))  # v1beta1 writes the fields on the request


def parse_claim_spec(spec: Any, features: AllocatorFeatures = ALL_FEATURES) -> ClaimSpec:
    """`spec` of a ResourceClaim (the inner `spec.spec` of a template), any resource.k8s.io version."""
    devices = _mapping(_mapping(spec, "spec").get("devices") or {}, "spec.devices")
    requests = tuple(_request(r, f"spec.devices.requests[{i}]", features) for i, r in enumerate(_items(devices.get("requests"), "spec.devices.requests")))
    names = {r.name for r in requests} | {o.name for r in requests for o in r.options}
    constraints = []
    for i, c in enumerate(_items(devices.get("constraints"), "spec.devices.constraints")):
        where = f"spec.devices.constraints[{i}]"
        c = _mapping(c, where)
        distinct = bool(c.get("distinctAttribute"))
        if distinct and not features.on("DRAConsumableCapacity"):
            raise ClaimError(f"{where}.distinctAttribute needs the DRAConsumableCapacity feature gate, off on this Kubernetes version")
        field = "distinctAttribute" if distinct else "matchAttribute"
        attribute = c.get(field)
        if not isinstance(attribute, str) or "/" not in attribute:
            raise ClaimError(f"{where}.{field} must be a fully qualified attribute name (domain/name)")
        listed = _items(c.get("requests"), f"{where}.requests")
        unknown = [str(r) for r in listed if not isinstance(r, str) or r not in names]
        if unknown:
            raise ClaimError(f"{where}.requests names unknown request(s) {', '.join(unknown)}")
        constraints.append(Constraint(attribute, frozenset(listed), distinct))
    claim = ClaimSpec(requests, tuple(constraints))
    limit = dra_limits()["devicesPerClaim"]
    if claim.min_devices > limit:
        raise ClaimError(f"the claim asks for at least {claim.min_devices} devices, more than the limit of {limit} per claim")
    return claim


def parse_device_class(manifest: dict[str, Any]) -> DeviceClass:
    name = manifest["metadata"]["name"]
    spec = manifest.get("spec")
    return DeviceClass(name, _selectors(_mapping(spec, f"DeviceClass {name} spec").get("selectors") if spec is not None else None,
                                        f"DeviceClass {name} spec"))
