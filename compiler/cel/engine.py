"""Compile-once, evaluate-once-per-distinct-input DRA CEL selectors.

A cluster has tens of thousands of devices but only a handful of distinct values for what a
selector reads (every H100 has the same productName and memory). Each compiled selector therefore
keeps a memo keyed by the values of exactly the device fields its syntax tree references
(`analysis.Ref`); devices that agree on them get the stored result (true, false or the evaluation
error) without running cel-python again. The key is exact: bools are tagged so that `true` and `1`
never share an entry, versions are keyed by their full text, quantities by value and format (which
decide their text: 80Gi and 85899345920 are equal but print differently), and a whole-domain read
by every name and value of the domain.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError
from lark import Tree

from ..facts.platform import dra_limits
from .analysis import CAPACITY_FIELDS, DEVICE_FIELDS, WHOLE_DEVICE, Analysis, Ref, analyse
from .attrlist import AttrList
from .library import FUNCTIONS, LIST_FUNCTIONS, activation
from .parser import install as install_parser
from .quantity import Quantity
from .semver import Semver
from .static import Problem, compile_problems


class DeviceData(Protocol):
    """What CEL can see of a device. Attribute names are already qualified by domain."""

    driver: str
    attributes: dict[str, dict[str, Any]]
    capacity: dict[str, dict[str, Any]]


class CelCompileError(ValueError):
    """The expression does not compile in the DRA CEL environment (the API server would reject it)."""

    def __init__(self, text: str, problems: list[Problem]) -> None:
        self.text = text
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


class CelEvaluationError(RuntimeError):
    """Evaluation failed on a device: a missing attribute, a type mismatch, a non-bool result."""


class _Failure:
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


_MISSING = ("<missing>",)  # a tuple no attribute value can equal
_EMPTY: dict = {}


def _tag(value: Any) -> Any:
    cls = value.__class__
    if cls is bool:
        return ("bool", value)
    if cls is Semver:
        return ("semver", str(value))
    if cls is Quantity:
        return ("quantity", value.value, value.format)
    if cls is AttrList:
        return ("list", value.kind, tuple(_tag(v) for v in value.items))
    return value


def _freeze(values: dict[str, Any] | None) -> tuple:
    return tuple(sorted((k, _tag(v)) for k, v in values.items())) if values else ()


def _getter(ref: Ref) -> Callable[[DeviceData], Any] | None:
    field, domain, name = ref.field, ref.domain, ref.name
    if field == "driver":
        return lambda d: d.driver
    if field == "allowMultipleAllocations":
        return lambda d: bool(getattr(d, "multi", False))
    if field not in ("attributes", "capacity"):
        return None  # an unknown field reads nothing that varies between devices
    if domain is None:
        return lambda d: tuple(sorted((k, _freeze(v)) for k, v in getattr(d, field).items()))
    if name is None:
        return lambda d: _freeze(getattr(d, field).get(domain))
    if field == "attributes":
        return lambda d: _tag(d.attributes.get(domain, _EMPTY).get(name, _MISSING))
    return lambda d: _tag(d.capacity.get(domain, _EMPTY).get(name, _MISSING))


def _key_function(analysis: Analysis) -> Callable[[DeviceData], Any] | None:
    """The memo key of a device for this expression, or None when the expression reads the whole device."""
    if any(r.field == WHOLE_DEVICE for r in analysis.refs):
        return None
    getters = [g for g in (_getter(r) for r in sorted(analysis.refs)) if g is not None]
    if not getters:
        return lambda d: ()
    if len(getters) == 1:
        return getters[0]
    if len(getters) == 2:
        first, second = getters
        return lambda d: (first(d), second(d))
    return lambda d: tuple([g(d) for g in getters])


class Selector:
    """One compiled expression with its memo. Use `compile_selector` to get the shared instance."""

    __slots__ = ("text", "analysis", "depth", "_runner", "_key", "_memo")

    def __init__(self, text: str, runner: celpy.Runner, analysis: Analysis, depth: int = 0) -> None:
        self.text = text
        self.analysis = analysis
        self.depth = depth  # syntax-tree depth: how much Python stack cel-python's evaluation needs
        self._runner = runner
        self._key = _key_function(analysis)
        self._memo: dict[Any, bool | _Failure] = {}

    def matches(self, device: DeviceData) -> bool:
        """The selector's result on `device`; raises CelEvaluationError like the scheduler would."""
        if self._key is None:
            return self.matches_uncached(device)
        key = self._key(device)
        result = self._memo.get(key)
        if result is None:
            result = self._memo[key] = self._run(device)
        if result.__class__ is _Failure:
            raise CelEvaluationError(result.message)
        return result  # type: ignore[return-value]

    def forget(self) -> None:
        """Drop the memo, so that the next evaluations pay what a fresh process pays (benchmarks)."""
        self._memo.clear()

    def matches_uncached(self, device: DeviceData) -> bool:
        """Plain cel-python evaluation, the reference the cache is tested against."""
        result = self._run(device)
        if isinstance(result, _Failure):
            raise CelEvaluationError(result.message)
        return result

    def value(self, device: DeviceData) -> Any:
        """The expression's value on `device` as cel-python returns it (derived attributes), not memoised;
        raises CelEvaluationError."""
        value = self._evaluate(device)
        if isinstance(value, _Failure):
            raise CelEvaluationError(value.message)
        return value

    def _evaluate(self, device: DeviceData) -> Any:
        try:
            with stack_for(self.depth):
                return self._runner.evaluate(activation(device))
        except RecursionError:
            return _Failure(TOO_DEEP.format(depth=self.depth, limit=MAX_NESTING))
        except CELEvalError as exc:
            return _Failure(_describe(exc))
        except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError) as exc:
            return _Failure(f"evaluation failed: {exc}")

    def _run(self, device: DeviceData) -> bool | _Failure:
        value = self._evaluate(device)
        if isinstance(value, _Failure):
            return value
        if not isinstance(value, celtypes.BoolType):
            return _Failure(f"the expression must evaluate to bool, it returned {type(value).__name__.removesuffix('Type').lower()}")
        return bool(value)


_OVERLOAD = re.compile(r"found no matching overload for Token\('RULE', '(\w+)'\) applied to '\((.*)\)'")
_CLASS = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>")
_SYMBOLS = {"relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=", "relation_eq": "==",
            "relation_ne": "!=", "relation_in": "in", "addition_add": "+", "addition_sub": "-",
            "multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%"}


def _describe(exc: CELEvalError) -> str:
    """cel-python's messages, in the words of the Kubernetes CEL errors users search for."""
    message = str(exc.args[0]) if exc.args else str(exc)
    if message.startswith("no such member in mapping: "):
        return f"no such key: {message.removeprefix('no such member in mapping: ')} (the device does not have it)"
    match = _OVERLOAD.match(message)
    if match:
        types = [t.removesuffix("Type").lower() if t.endswith("Type") else t for t in _CLASS.findall(match.group(2))]
        return f"no such overload: {types[0] if types else '?'} {_SYMBOLS.get(match.group(1), match.group(1))} {types[1] if len(types) > 1 else '?'}"
    return message


_ENVIRONMENT: celpy.Environment | None = None
_CACHE: dict[tuple[str, bool, bool, bool], Selector] = {}


def environment() -> celpy.Environment:
    """The one cel-python environment of the process, its Lark parser loaded from precomputed tables (building
    it from the grammar costs 0.12 s CPU, a tenth of a warm render that rebuilds one cluster)."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        install_parser()
        _ENVIRONMENT = celpy.Environment()
    return _ENVIRONMENT


# cel-python and lark walk the syntax tree recursively, about six Python frames per level: 600 terms
# of `a || b || ...` (4.8 KiB, a valid selector) are 620 levels, past Python's default limit of 1000
# frames. The stack is raised for deep expressions while cel-python runs; beyond MAX_NESTING levels
# (only reachable with contrived nesting: 10 KiB of `||` terms is about 1,300) gpuc refuses cleanly.
MAX_NESTING = 2500
_FRAMES_PER_LEVEL = 8
TOO_DEEP = ("expression too deeply nested for gpuc's CEL evaluator (syntax-tree depth {depth}, gpuc evaluates up to "
            "{limit}); split it into several selectors (a device must match all of them)")


def nesting(tree: Any) -> int:
    """Depth of a syntax tree, found without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, Tree))
    return deepest


@contextmanager
def stack_for(depth: int) -> Iterator[None]:
    """Python's recursion limit raised enough for a tree of `depth` levels, only while the block runs."""
    needed = depth * _FRAMES_PER_LEVEL + 1000
    old = sys.getrecursionlimit()
    if needed <= old:
        yield
        return
    sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _refuse(text: str, code: str, message: str) -> CelCompileError:
    return CelCompileError(text, [Problem("error", code, message)])


def parse(text: str) -> Any:
    """The cel-python syntax tree; raises CelCompileError on a syntax error, an expression longer than the API
    server compiles, or one nested deeper than gpuc can evaluate."""
    limit = dra_limits()["celExpressionLength"]
    size = len(text.encode("utf-8"))
    if size > limit:  # the API server reports the length and does not compile it
        raise _refuse(text, "too-long", f"expression is {size} bytes; the API server accepts at most {limit} and does not compile it")
    try:
        with stack_for(MAX_NESTING):
            tree = environment().compile(text)
    except celpy.CELParseError as exc:
        where = f" at line {exc.line}, column {exc.column}" if getattr(exc, "line", None) else ""
        first = str(exc.args[0]).splitlines()[0] if exc.args else "syntax error"
        raise _refuse(text, "syntax", f"syntax error{where}: {first}") from None
    except RecursionError:
        raise _refuse(text, "too-deep", TOO_DEEP.format(depth=f"over {MAX_NESTING}", limit=MAX_NESTING)) from None
    depth = nesting(tree)
    if depth > MAX_NESTING:
        raise _refuse(text, "too-deep", TOO_DEEP.format(depth=depth, limit=MAX_NESTING))
    return tree


def compile_selector(text: str, consumable_capacity: bool = False, list_attributes: bool = False,
                     any_type: bool = False) -> Selector:
    """Compile (once per text) a device selector; raises CelCompileError when the API server would reject it.
    With `consumable_capacity` (the DRAConsumableCapacity gate) `device.allowMultipleAllocations` is declared,
    with `list_attributes` (DRAListTypeAttributes) the `includes` function. `any_type`: an expression of any
    result type, read with `Selector.value` (a derived attribute's)."""
    key = (text, consumable_capacity, list_attributes, any_type)
    selector = _CACHE.get(key)
    if selector is None:
        tree = parse(text)
        depth = nesting(tree)
        with stack_for(depth):
            analysis = analyse(tree)
            fields = CAPACITY_FIELDS if consumable_capacity else DEVICE_FIELDS
            extra = LIST_FUNCTIONS if list_attributes else {}
            errors = [p for p in compile_problems(tree, analysis, fields, frozenset(extra))
                      if p.severity == "error" and not (any_type and p.code == "not-bool")]
            if errors:
                raise CelCompileError(text, errors)
            runner = environment().program(tree, functions={**FUNCTIONS, **extra})
        selector = _CACHE[key] = Selector(text, runner, analysis, depth)
    return selector
