"""A structural schema compiled once into a tree of validator nodes, then run on many objects.

One engine serves the Kubernetes built-in kinds (kubernetes-validate's JSON schemas), CRD
`openAPIV3Schema`s and the DRA driver's opaque config API (a table in facts/). It follows the API
server's structural-schema semantics rather than plain JSON Schema: a field the schema does not
define is an error (the API server would prune it silently), `nullable`, `x-kubernetes-int-or-string`,
`x-kubernetes-preserve-unknown-fields`, list types `set` and `map`, `default`s applied before
validation, and `x-kubernetes-validations` handed to a CEL evaluator with `self` and, when an older
version of the object is known, `oldSelf`. Nodes are plain objects with slots: a render of
thousands of objects spends microseconds per field here, where jsonschema spends milliseconds.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..diagnostics import did_you_mean
from ..validate.types import quantity_value

MISSING: Any = object()  # no value (absent field, or no old object to compare with)
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_QUANTITY_REFS = ("io.k8s.apimachinery.pkg.api.resource.Quantity",)
_INT_OR_STRING_REFS = ("io.k8s.apimachinery.pkg.util.intstr.IntOrString",)
_EMBEDDED_META = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True)
class Violation:
    """One way a value breaks its schema, at a path inside the validated object."""

    path: tuple[str | int, ...]
    message: str
    hint: str = ""
    severity: str = "error"
    transition: bool = False  # from a rule on oldSelf: the object is valid, the update is not


class RuleEvaluator(Protocol):
    """Evaluates one `x-kubernetes-validations` rule; returns None when it holds, else a violation."""

    def __call__(self, rule: Rule, self_value: Any, old_value: Any) -> tuple[str, str, str] | None: ...


@dataclass(frozen=True)
class Rule:
    """An `x-kubernetes-validations` entry as written in the schema."""

    rule: str
    message: str = ""
    message_expression: str = ""
    field_path: str = ""
    reason: str = ""
    optional_old_self: bool = False
    # gpuc's own key x-gpuc-severity in its facts: "warning" where the consumer takes the value anyway
    severity: str = "error"

    @property
    def uses_old_self(self) -> bool:
        return re.search(r"\boldSelf\b", self.rule) is not None


@dataclass
class Context:
    """What one validation run needs besides the value: output, mode flags and the CEL hook."""

    out: list[Violation] = field(default_factory=list)
    partial: bool = False  # a server-side-apply patch: missing required fields are fine, rules are not run
    rules: RuleEvaluator | None = None

    def add(self, at: Any, message: str, hint: str = "", severity: str = "error", transition: bool = False) -> None:
        self.out.append(Violation(unwind(at), message, hint, severity, transition))


def unwind(at: Any) -> tuple[str | int, ...]:
    """Paths travel as (parent, key) pairs so that descending costs nothing; flatten one on error."""
    parts: list[str | int] = []
    while at is not None:
        at, key = at
        parts.append(key)
    return tuple(reversed(parts))


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
               type(None): "null"}


def json_type(value: Any) -> str:
    """The JSON type of a decoded YAML/JSON value (exact types: a bool is not an integer)."""
    return _JSON_TYPES.get(type(value)) or type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Node:
    """A compiled schema. Unset slots mean "no constraint"; `check` walks value and old value together."""

    __slots__ = (
        "types", "nullable", "properties", "required", "additional", "free_form", "preserve_unknown",
        "embedded", "items", "enum", "pattern", "min_length", "max_length", "minimum", "maximum",
        "exclusive_minimum", "exclusive_maximum", "multiple_of", "min_items", "max_items", "unique_items",
        "min_properties", "max_properties", "format", "min_quantity", "list_type", "map_keys", "rules",
        "all_of", "any_of", "one_of", "not_", "defaults", "unknown_hints", "skip", "has_defaults",
    )

    def __init__(self) -> None:
        self.types: frozenset[str] | None = None
        self.nullable = False
        self.properties: dict[str, Node] | None = None
        self.required: tuple[str, ...] = ()
        self.additional: Node | bool | None = None
        self.free_form = False  # an object with neither properties nor additionalProperties (JSON Schema meaning)
        self.preserve_unknown = False
        self.embedded = False
        self.items: Node | None = None
        self.enum: tuple[Any, ...] | None = None
        self.pattern: re.Pattern[str] | None = None
        self.min_length = self.max_length = None
        self.minimum = self.maximum = None
        self.exclusive_minimum = self.exclusive_maximum = False
        self.multiple_of = None
        self.min_items = self.max_items = None
        self.unique_items = False
        self.min_properties = self.max_properties = None
        self.format: str | None = None
        self.min_quantity: tuple[Any, str] | None = None
        self.list_type: str | None = None
        self.map_keys: tuple[str, ...] = ()
        self.rules: tuple[Rule, ...] = ()
        self.all_of: tuple[Node, ...] = ()
        self.any_of: tuple[Node, ...] = ()
        self.one_of: tuple[Node, ...] = ()
        self.not_: Node | None = None
        self.defaults: dict[str, Any] | None = None  # property -> default value
        self.unknown_hints: dict[str, str] | None = None
        self.skip: frozenset[str] = frozenset()  # properties validated elsewhere (a custom resource's metadata)
        self.has_defaults = False  # some node below sets a default

    # ------------------------------------------------------------------------------- validation

    def check(self, value: Any, old: Any, at: Any, ctx: Context) -> None:
        if value is None:
            if not self.nullable and self.types is not None:
                ctx.add(at, f"must be {self._expected()}, got null", "remove the field, or give it a value")
            return
        kind = json_type(value)
        types = self.types
        if types is not None and kind not in types and not (kind == "integer" and "number" in types):
            ctx.add(at, f"must be {self._expected()}, got {kind} {_short(value)}", self._type_hint(kind, value))
            return
        if kind == "object":
            self._check_object(value, old, at, ctx)
        elif kind == "array":
            self._check_array(value, old, at, ctx)
        else:
            self._check_scalar(value, kind, at, ctx)
        if self.enum is not None and value not in self.enum:
            choices = [str(c) for c in self.enum]
            ctx.add(at, f"must be one of {', '.join(repr(c) for c in self.enum)}; got {_short(value)}",
                    did_you_mean(str(value), choices) if isinstance(value, str) else "")
        if self.all_of or self.any_of or self.one_of or self.not_ is not None:
            self._check_combinators(value, at, ctx)
        if self.rules and ctx.rules is not None and not ctx.partial:
            self._check_rules(value, old, at, ctx)

    def _expected(self) -> str:
        if not self.types:
            return "a value"
        names = sorted(self.types)
        article = {"object": "an object", "array": "a list", "integer": "an integer", "string": "a string",
                   "number": "a number", "boolean": "a boolean (true or false)"}
        return " or ".join(article.get(n, n) for n in names)

    def _type_hint(self, kind: str, value: Any) -> str:
        if self.types == frozenset({"string"}) and kind in ("integer", "number", "boolean"):
            return f"quote it: \"{str(value).lower() if isinstance(value, bool) else value}\""
        if "boolean" in (self.types or ()) and value in ("true", "false"):
            return f"write the boolean without quotes: {value}"
        if "array" in (self.types or ()) and kind in ("string", "integer", "object"):
            return "write it as a list"
        return ""

    def _check_object(self, value: dict, old: Any, at: Any, ctx: Context) -> None:
        props = self.properties
        old_map = old if isinstance(old, dict) else None
        if not ctx.partial:
            for name in self.required:
                if name not in value:
                    ctx.add(at, f"required field '{name}' is missing")
        skip = self.skip
        for key, child in value.items():
            if key in skip:
                continue
            node = props.get(key) if props is not None else None
            child_old = old_map.get(key, MISSING) if old_map is not None else MISSING
            if node is not None:
                node.check(child, child_old, (at, key), ctx)
            elif isinstance(self.additional, Node):
                self.additional.check(child, child_old, (at, key), ctx)
            elif self.additional is True or self.preserve_unknown or self.free_form:
                continue
            elif self.embedded and key in _EMBEDDED_META:
                continue
            else:
                ctx.add((at, key), f"unknown field '{key}'", self._unknown_hint(key, child))
        count = len(value)
        if self.min_properties is not None and count < self.min_properties:
            ctx.add(at, f"must have at least {self.min_properties} field(s), has {count}")
        if self.max_properties is not None and count > self.max_properties:
            ctx.add(at, f"may have at most {self.max_properties} field(s), has {count}")

    def _unknown_hint(self, key: str, value: Any) -> str:
        if self.unknown_hints and key in self.unknown_hints:
            return self.unknown_hints[key]
        props = self.properties or {}
        for name, node in sorted(props.items()):
            if node.properties and key in node.properties:
                return f"'{key}' is a field of '{name}' here: nest it under `{name}:`"
        if isinstance(value, dict) and value and props and all(k in props for k in value):
            return f"'{key}' does not exist here: its fields ({', '.join(sorted(value))}) belong directly on this object"
        close = did_you_mean(key, props)
        if close:
            return close
        if props:
            names = sorted(props)
            return "fields here: " + ", ".join(names[:15]) + (", ..." if len(names) > 15 else "")
        return "this object takes no fields"

    def _check_array(self, value: list, old: Any, at: Any, ctx: Context) -> None:
        count = len(value)
        if self.min_items is not None and count < self.min_items:
            ctx.add(at, f"must have at least {self.min_items} item(s), has {count}")
        if self.max_items is not None and count > self.max_items:
            ctx.add(at, f"may have at most {self.max_items} item(s), has {count}")
        items = self.items
        old_items = self._correlate(old) if isinstance(old, list) else None
        if items is not None:
            for i, item in enumerate(value):
                child_old = MISSING
                if old_items is not None:
                    child_old = old_items.get(self._item_key(item), MISSING)
                items.check(item, child_old, (at, i), ctx)
        if self.list_type == "set" or self.unique_items:
            self._check_unique(value, at, ctx, lambda item: item, "duplicate item")
        elif self.list_type == "map" and self.map_keys:
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    for key in self.map_keys:
                        if key not in item and not (items is not None and items.defaults and key in items.defaults):
                            ctx.add((at, i), f"required field '{key}' is missing (it identifies the item in this list)")
            self._check_unique(value, at, ctx, self._item_key, "duplicate entry for key")

    def _item_key(self, item: Any) -> Any:
        if self.list_type == "map" and isinstance(item, dict):
            return tuple(_freeze(item.get(k)) for k in self.map_keys)
        if self.list_type == "set":
            return _freeze(item)
        return None

    def _correlate(self, old: list) -> dict[Any, Any] | None:
        """Old items by identity; only map and set lists correlate (as in the API server)."""
        if self.list_type not in ("map", "set"):
            return None
        return {self._item_key(item): item for item in old}

    @staticmethod
    def _check_unique(value: list, at: Any, ctx: Context, key: Callable[[Any], Any], what: str) -> None:
        seen: dict[Any, int] = {}
        for i, item in enumerate(value):
            k = key(item)
            if k in seen:
                shown = k if not isinstance(k, tuple) or len(k) != 1 else k[0]
                ctx.add((at, i), f"{what} {_short(shown)} (same as item {seen[k]})", "list each entry once")
            else:
                seen[k] = i

    def _check_scalar(self, value: Any, kind: str, at: Any, ctx: Context) -> None:
        if kind == "string":
            if self.min_length is not None or self.max_length is not None:
                n = len(value)
                if self.min_length is not None and n < self.min_length:
                    ctx.add(at, f"must be at least {self.min_length} character(s) long" + (", got an empty string" if n == 0 else f", got {n}"))
                if self.max_length is not None and n > self.max_length:
                    ctx.add(at, f"may be at most {self.max_length} characters long, got {n}")
            if self.pattern is not None and not self.pattern.search(value):
                ctx.add(at, f"{_short(value)} does not match the pattern {self.pattern.pattern}")
            if self.format is not None:
                self._check_string_format(value, at, ctx)
        elif kind in ("integer", "number"):
            if self.minimum is not None and (value < self.minimum or (self.exclusive_minimum and value == self.minimum)):
                ctx.add(at, f"must be {'greater than' if self.exclusive_minimum else 'at least'} {self.minimum}, got {value}")
            if self.maximum is not None and (value > self.maximum or (self.exclusive_maximum and value == self.maximum)):
                ctx.add(at, f"must be {'less than' if self.exclusive_maximum else 'at most'} {self.maximum}, got {value}")
            if self.multiple_of and value % self.multiple_of:
                ctx.add(at, f"must be a multiple of {self.multiple_of}, got {value}")
            if kind == "integer" and self.format in ("int32", "int64"):
                low, high = INT32 if self.format == "int32" else INT64
                if not low <= value <= high:
                    ctx.add(at, f"{value} does not fit a {self.format}")
            if self.format == "quantity" or self.min_quantity is not None:
                self._check_quantity(value, at, ctx)

    def _check_string_format(self, value: str, at: Any, ctx: Context) -> None:
        if self.format == "quantity":
            self._check_quantity(value, at, ctx)
        elif self.format == "byte":
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                ctx.add(at, "must be base64-encoded data")

    def _check_quantity(self, value: Any, at: Any, ctx: Context) -> None:
        amount = quantity_value(value)
        if amount is None:
            ctx.add(at, f"{_short(value)} is not a Kubernetes quantity", "write a number with an optional suffix, e.g. \"10Gi\" or \"500m\"")
        elif self.min_quantity is not None and amount < self.min_quantity[0]:
            ctx.add(at, f"must be at least {self.min_quantity[1]}, got {_short(value)}")

    def _check_combinators(self, value: Any, at: Any, ctx: Context) -> None:
        def passes(node: Node) -> bool:
            probe = Context(partial=ctx.partial)
            node.check(value, MISSING, None, probe)
            return not probe.out

        for node in self.all_of:
            node.check(value, MISSING, at, ctx)
        if self.any_of and not any(passes(n) for n in self.any_of):
            ctx.add(at, f"matches none of the {len(self.any_of)} allowed forms (anyOf)")
        if self.one_of:
            matched = sum(1 for n in self.one_of if passes(n))
            if matched != 1:
                ctx.add(at, f"must match exactly one of {len(self.one_of)} forms (oneOf), matches {matched}")
        if self.not_ is not None and passes(self.not_):
            ctx.add(at, "matches a form the schema forbids (not)")

    def _check_rules(self, value: Any, old: Any, at: Any, ctx: Context) -> None:
        for rule in self.rules:
            if rule.uses_old_self and old is MISSING:
                continue  # a transition rule: only an update has an old value to compare with
            outcome = ctx.rules(rule, value, old)  # type: ignore[misc]
            if outcome is None:
                continue
            message, hint, severity = outcome
            where = at
            for part in _field_path(rule.field_path):
                where = (where, part)
            ctx.add(where, message, hint, severity, rule.uses_old_self)

    # ------------------------------------------------------------------------------- defaulting

    def apply_defaults(self, value: Any) -> Any:
        """`value` with the schema's defaults filled in, as the API server does before validating.

        Returns `value` itself when nothing changes, so objects without defaults are never copied.
        """
        if not self.has_defaults or value is None:
            return value
        if isinstance(value, dict):
            out = value
            for key, child in value.items():
                node = self.properties.get(key) if self.properties else None
                if node is None and isinstance(self.additional, Node):
                    node = self.additional
                if node is not None:
                    new = node.apply_defaults(child)
                    if new is not child:
                        out = dict(out) if out is value else out
                        out[key] = new
            if self.defaults:
                properties = self.properties or {}
                for key, default in self.defaults.items():
                    if key not in value or (value[key] is None and not (key in properties and properties[key].nullable)):
                        out = dict(out) if out is value else out
                        out[key] = copy.deepcopy(default)
            return out
        if isinstance(value, list) and self.items is not None:
            new_items = [self.items.apply_defaults(v) for v in value]
            if any(n is not o for n, o in zip(new_items, value)):
                return new_items
        return value


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _field_path(path: str) -> list[str | int]:
    """`.spec.items[0]` or `.spec['a.b']` (a rule's fieldPath) -> path parts."""
    parts: list[str | int] = []
    for match in re.finditer(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['([^']*)'\]", path or ""):
        name, index, quoted = match.groups()
        parts.append(int(index) if index is not None else (name if name is not None else quoted))
    return parts


# ------------------------------------------------------------------------------------- compiling

class SchemaError(ValueError):
    """A schema gpuc cannot compile (a malformed CRD, a construct outside structural schemas)."""


Resolver = Callable[[str], dict]


class Compiler:
    """Turns schema dicts into Nodes. `$ref`s resolve through `resolver` and compile once each.

    `structural` picks the CRD meaning of an object without properties (nothing is allowed: the API
    server prunes every field) over the JSON Schema meaning (anything is allowed).
    """

    def __init__(self, resolver: Resolver | None = None, structural: bool = True) -> None:
        self.resolver = resolver
        self.structural = structural
        self._refs: dict[str, Node] = {}
        self._all: list[Node] = []

    def compile(self, schema: dict) -> Node:
        node = self._compile(schema)
        self._finish()
        return node

    def _finish(self) -> None:
        """Mark nodes with defaults below them (a fixed point, since `$ref`s can form cycles)."""
        changed = True
        while changed:
            changed = False
            for node in self._all:
                if node.has_defaults:
                    continue
                children = list((node.properties or {}).values())
                if isinstance(node.additional, Node):
                    children.append(node.additional)
                if node.items is not None:
                    children.append(node.items)
                if node.defaults or any(c.has_defaults for c in children):
                    node.has_defaults = True
                    changed = True

    def _compile(self, schema: Any) -> Node:
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be a mapping, got {json_type(schema)}")
        ref = schema.get("$ref")
        if ref is not None:
            return self._ref(ref)
        node = Node()
        self._all.append(node)
        self._fill(node, schema)
        return node

    def _ref(self, ref: str) -> Node:
        name = ref.rsplit("/", 1)[-1]
        if name in self._refs:
            return self._refs[name]
        if self.resolver is None:
            raise SchemaError(f"cannot resolve $ref {ref}")
        if name in _QUANTITY_REFS:
            target: dict = {"x-kubernetes-int-or-string": True, "format": "quantity", "nullable": True}
        elif name in _INT_OR_STRING_REFS:
            target = {"x-kubernetes-int-or-string": True, "nullable": True}
        else:
            target = self.resolver(ref)
        node = Node()
        self._all.append(node)
        self._refs[name] = node  # registered before filling: recursive schemas refer to themselves
        self._fill(node, target)
        return node

    def _fill(self, node: Node, s: dict) -> None:
        raw_type = s.get("type")
        types = set(raw_type) if isinstance(raw_type, list) else ({raw_type} if raw_type else set())
        if "null" in types:
            types.discard("null")
            node.nullable = True
        if s.get("nullable"):
            node.nullable = True
        if s.get("x-kubernetes-int-or-string"):
            types = {"integer", "string"}
        if s.get("oneOf") and all(isinstance(o, dict) and set(o) <= {"type"} for o in s["oneOf"]):
            for option in s["oneOf"]:  # JSON Schema's spelling of "int or string", "string or number"
                t = option.get("type")
                for name in (t if isinstance(t, list) else [t]):
                    if name == "null":
                        node.nullable = True
                    elif name:
                        types.add(name)
            s = {k: v for k, v in s.items() if k != "oneOf"}
        node.types = frozenset(types) if types else None
        node.preserve_unknown = bool(s.get("x-kubernetes-preserve-unknown-fields"))
        node.embedded = bool(s.get("x-kubernetes-embedded-resource"))
        props = s.get("properties")
        if props is not None:
            if not isinstance(props, dict):
                raise SchemaError("properties must be a mapping")
            node.properties = {k: self._compile(v) for k, v in props.items()}
            defaults = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
            node.defaults = defaults or None
        node.required = tuple(s.get("required") or ())
        additional = s.get("additionalProperties")
        if isinstance(additional, dict):
            node.additional = self._compile(additional)
        elif isinstance(additional, bool):
            node.additional = additional
        if props is None and additional is None and not self.structural:
            node.free_form = True
        if node.types is None and props is None and additional is None and not s.get("items"):
            node.free_form = True  # no type and no structure: any value (JSON, RawExtension)
        if "items" in s and isinstance(s["items"], dict):
            node.items = self._compile(s["items"])
        if "enum" in s:
            node.enum = tuple(s["enum"])
        if "pattern" in s:
            try:
                node.pattern = re.compile(s["pattern"])
            except re.error as exc:
                raise SchemaError(f"pattern {s['pattern']!r} is not a regular expression gpuc understands: {exc}") from None
        node.min_length, node.max_length = s.get("minLength"), s.get("maxLength")
        node.minimum, node.maximum = s.get("minimum"), s.get("maximum")
        for bound, flag in (("exclusiveMinimum", "exclusive_minimum"), ("exclusiveMaximum", "exclusive_maximum")):
            value = s.get(bound)
            if isinstance(value, bool):
                setattr(node, flag, value)
            elif isinstance(value, (int, float)):  # JSON Schema 2020-12 spelling: the bound itself
                setattr(node, flag, True)
                setattr(node, "minimum" if bound == "exclusiveMinimum" else "maximum", value)
        node.multiple_of = s.get("multipleOf")
        node.min_items, node.max_items = s.get("minItems"), s.get("maxItems")
        node.unique_items = bool(s.get("uniqueItems"))
        node.min_properties, node.max_properties = s.get("minProperties"), s.get("maxProperties")
        node.format = s.get("format")
        if "x-gpuc-minimum-quantity" in s:
            text = str(s["x-gpuc-minimum-quantity"])
            amount = quantity_value(text)
            if amount is None:
                raise SchemaError(f"x-gpuc-minimum-quantity {text!r} is not a quantity")
            node.min_quantity = (amount, text)
        node.list_type = s.get("x-kubernetes-list-type")
        node.map_keys = tuple(s.get("x-kubernetes-list-map-keys") or ())
        node.rules = tuple(_rules(s.get("x-kubernetes-validations") or ()))
        node.all_of = tuple(self._compile(x) for x in s.get("allOf") or ())
        node.any_of = tuple(self._compile(x) for x in s.get("anyOf") or ())
        node.one_of = tuple(self._compile(x) for x in s.get("oneOf") or ())
        if "not" in s:
            node.not_ = self._compile(s["not"])
        if "x-gpuc-unknown-hints" in s:
            node.unknown_hints = dict(s["x-gpuc-unknown-hints"])


def _rules(entries: Iterable[Any]) -> Iterable[Rule]:
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("rule"), str):
            raise SchemaError("each x-kubernetes-validations entry needs a `rule` string")
        yield Rule(e["rule"], str(e.get("message") or ""), str(e.get("messageExpression") or ""),
                   str(e.get("fieldPath") or ""), str(e.get("reason") or ""), bool(e.get("optionalOldSelf")),
                   str(e.get("x-gpuc-severity") or "error"))


def validate(node: Node, value: Any, old: Any = MISSING, *, partial: bool = False,
             rules: RuleEvaluator | None = None) -> list[Violation]:
    """Every violation of `value` (defaults applied first, like the API server) against `node`."""
    ctx = Context(partial=partial, rules=rules)
    value = node.apply_defaults(value)
    if old is not MISSING:
        old = node.apply_defaults(old)
    node.check(value, old, None, ctx)
    return ctx.out
