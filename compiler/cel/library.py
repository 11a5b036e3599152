"""The Kubernetes DRA CEL environment on cel-python: the `device` variable and the quantity, semver
and string functions of the apiserver's base environment that device selectors use.

cel-python dispatches `x.f(y)` to the function named `f` with `x` first, so one function serves a
method on both Quantity and Semver (`compareTo`, `isGreaterThan`, `isLessThan`) and picks by type.
Errors are returned as `CELEvalError` values, which cel-python propagates with CEL's rules
(`false && error` is false, `error == x` is an error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from .attrlist import AttrList
from .quantity import Quantity, QuantityError
from .semver import Semver, SemverError


def _error(message: str) -> CELEvalError:
    return CELEvalError(message, TypeError, ())


def _no_overload(name: str, *args: Any) -> CELEvalError:
    types = ", ".join(_type_name(a) for a in args)
    return _error(f"no such overload: {name}({types})")


def _type_name(value: Any) -> str:
    names = {Quantity: "Quantity", Semver: "Semver", celtypes.StringType: "string", celtypes.IntType: "int",
             celtypes.BoolType: "bool", celtypes.DoubleType: "double", celtypes.MapType: "map", celtypes.ListType: "list"}
    return names.get(type(value), type(value).__name__)


# ------------------------------------------------------------------------------------- quantity

def _quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return _no_overload("quantity", text)
    try:
        return Quantity.parse(text)
    except QuantityError as exc:
        return _error(str(exc))


def _is_quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return _no_overload("isQuantity", text)
    try:
        Quantity.parse(text)
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _quantity_method(name: str, body: Callable[[Quantity], Any]) -> Callable[[Any], Any]:
    def method(target: Any) -> Any:
        if not isinstance(target, Quantity):
            return _no_overload(name, target)
        return body(target)
    method.__name__ = name
    return method


def _as_integer(q: Quantity) -> Any:
    if not q.is_integer():
        return _error(f"cannot convert quantity {q} to an integer: it is fractional or out of the int64 range")
    return celtypes.IntType(q.value)


def _arith(name: str) -> Callable[[Any, Any], Any]:
    def op(target: Any, other: Any) -> Any:
        if not isinstance(target, Quantity) or not isinstance(other, (Quantity, int)) or isinstance(other, bool):
            return _no_overload(name, target, other)
        return target.add(other) if name == "add" else target.sub(other)
    op.__name__ = name
    return op


# --------------------------------------------------------------------------------------- semver

def _semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str) or not isinstance(normalize, (bool, celtypes.BoolType)):
        return _no_overload("semver", text)
    try:
        return Semver.parse(str(text), bool(normalize))
    except SemverError as exc:
        return _error(str(exc))


def _is_semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str):
        return _no_overload("isSemver", text)
    try:
        Semver.parse(str(text), bool(normalize))
    except SemverError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _semver_part(name: str) -> Callable[[Any], Any]:
    def part(target: Any) -> Any:
        if not isinstance(target, Semver):
            return _no_overload(name, target)
        return celtypes.IntType(getattr(target, name))
    part.__name__ = name
    return part


# ------------------------------------------------------------------------------- shared methods

def _ordered(name: str, result: Callable[[int], Any]) -> Callable[[Any, Any], Any]:
    """compareTo / isGreaterThan / isLessThan, defined on Quantity x Quantity and Semver x Semver."""
    def method(target: Any, other: Any) -> Any:
        if isinstance(target, Quantity) and isinstance(other, Quantity):
            return result(target.compare(other))
        if isinstance(target, Semver) and isinstance(other, Semver):
            return result(target.compare(other))
        return _no_overload(name, target, other)
    method.__name__ = name
    return method


def _string_method(name: str, body: Callable[[str], str]) -> Callable[[Any], Any]:
    def method(target: Any) -> Any:
        if not isinstance(target, str):
            return _no_overload(name, target)
        return celtypes.StringType(body(str(target)))
    method.__name__ = name
    return method


def _ascii_lower(text: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _ascii_upper(text: str) -> str:
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in text)


def _kind(value: Any) -> str:
    if isinstance(value, celtypes.BoolType) or isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"  # int, uint, double: CEL compares numbers across types by value
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def _equals(left: Any, right: Any) -> Any:
    """CEL heterogeneous equality: values of different types are unequal, not an error (cel-go semantics)."""
    if isinstance(left, CELEvalError):
        return left
    if isinstance(right, CELEvalError):
        return right
    kind = _kind(left)
    if kind != _kind(right):
        return celtypes.BoolType(False)
    if kind == "number":
        return celtypes.BoolType(Fraction(left) == Fraction(right))
    if kind == "ListType":  # element by element, with these rules: [true] is not [1] (list attributes)
        return celtypes.BoolType(len(left) == len(right) and all(_equals(a, b) for a, b in zip(left, right)))
    return celtypes.BoolType(bool(left == right))


def _not_equals(left: Any, right: Any) -> Any:
    result = _equals(left, right)
    return result if isinstance(result, CELEvalError) else celtypes.BoolType(not result)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "_==_": _equals,
    "_!=_": _not_equals,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _quantity_method("sign", lambda q: celtypes.IntType(q.sign())),
    "isInteger": _quantity_method("isInteger", lambda q: celtypes.BoolType(q.is_integer())),
    "asInteger": _quantity_method("asInteger", _as_integer),
    "asApproximateFloat": _quantity_method("asApproximateFloat", lambda q: celtypes.DoubleType(float(q.value))),
    "add": _arith("add"),
    "sub": _arith("sub"),
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
    "compareTo": _ordered("compareTo", lambda c: celtypes.IntType(c)),
    "isGreaterThan": _ordered("isGreaterThan", lambda c: celtypes.BoolType(c > 0)),
    "isLessThan": _ordered("isLessThan", lambda c: celtypes.BoolType(c < 0)),
    "lowerAscii": _string_method("lowerAscii", _ascii_lower),
    "upperAscii": _string_method("upperAscii", _ascii_upper),
}


def _includes(target: Any, arg: Any) -> Any:
    """`x.includes(y)` (DRAListTypeAttributes): whether list `x` has an element equal to `y`, or scalar `x` equals
    `y`, as k8s.io/dynamic-resource-allocation/cel includesFunc (CEL equality: no error across types)."""
    if isinstance(target, CELEvalError) or isinstance(arg, CELEvalError):
        return target if isinstance(target, CELEvalError) else arg
    items = target if isinstance(target, celtypes.ListType) else (target,)
    return celtypes.BoolType(any(bool(_equals(item, arg)) for item in items))


# Functions declared only with the DRAListTypeAttributes gate on (cel/compile.go: a versioned option of 1.36).
LIST_FUNCTIONS: dict[str, Callable[..., Any]] = {"includes": _includes}

# Names the apiserver's CEL environment has but this engine does not implement. An expression using
# them is valid for Kubernetes; gpuc reports that it cannot evaluate it rather than calling it wrong.
UNIMPLEMENTED = frozenset({
    "charAt", "indexOf", "lastIndexOf", "join", "replace", "split", "substring", "trim", "format", "reverse", "quote",
    "find", "findAll", "url", "isURL", "ip", "isIP", "cidr", "isCIDR", "bind", "optional", "orValue", "hasValue",
    "value", "or", "sets", "flatten", "sort", "sortBy", "slice", "distinct", "range", "first", "last", "transformList",
    "transformMap", "transformMapEntry", "isSorted", "sum", "max", "min",
})

# Functions and macros cel-python evaluates itself.
BUILTIN = frozenset({
    "has", "size", "contains", "startsWith", "endsWith", "matches", "type", "int", "uint", "double", "string",
    "bool", "bytes", "list", "map", "dyn", "timestamp", "duration", "exists", "all", "exists_one", "filter",
    "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth", "getHours",
    "getMilliseconds", "getMinutes", "getSeconds",
})
MACROS = frozenset({"exists", "all", "exists_one", "map", "filter"})
TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"})


# ---------------------------------------------------------------------------------- the device

class _DomainMap(celtypes.MapType):
    """device.attributes / device.capacity: an unknown domain is an empty map, not an error."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _cel_value(value: Any) -> Any:
    if isinstance(value, AttrList):  # the scheduler hands CEL every list attribute as a list, gate on or off
        return celtypes.ListType([_cel_value(v) for v in value.items])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    return value  # Semver, Quantity: our own types carry their CEL methods


def from_cel(value: Any) -> Any:
    """A CEL value as a device attribute value (a derived attribute's): string, int, bool, version, or a list of
    one of them; ValueError for anything else."""
    if isinstance(value, (celtypes.BoolType, bool)):
        return bool(value)
    if isinstance(value, int) and not isinstance(value, celtypes.UintType):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Semver):
        return value
    if isinstance(value, celtypes.ListType):
        items = [from_cel(v) for v in value]
        kinds = {("bools" if isinstance(v, bool) else "ints" if isinstance(v, int) else
                  "versions" if isinstance(v, Semver) else "strings" if isinstance(v, str) else "lists") for v in items}
        if len(kinds) > 1 or kinds == {"lists"}:
            raise ValueError("a list attribute holds values of one kind: string, int, bool or version")
        return AttrList(kinds.pop() if kinds else "strings", tuple(items))
    raise ValueError(f"an attribute is a string, int, bool, version or a list of them, not {_type_name(value)}")


def _domains(data: Mapping[str, Mapping[str, Any]]) -> _DomainMap:
    return _DomainMap({
        celtypes.StringType(domain): celtypes.MapType({celtypes.StringType(k): _cel_value(v) for k, v in values.items()})
        for domain, values in data.items()
    })


def activation(device: Any) -> dict[str, Any]:
    """The CEL variables for one device: `device.driver`, `device.attributes`, `device.capacity`,
    `device.allowMultipleAllocations` (compile_selector declares it only when the gate is on)."""
    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.driver),
        celtypes.StringType("attributes"): _domains(device.attributes),
        celtypes.StringType("capacity"): _domains(device.capacity),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(bool(getattr(device, "multi", False))),
    })}
