"""`x-kubernetes-validations` rules evaluated with cel-python, as the API server evaluates them.

cel-python needs about half a millisecond per evaluation, and a fleet has thousands of objects that
each meet the same rules. Each rule is therefore compiled once, and its outcome is memoized on the
part of `self`/`oldSelf` the rule can see: a static read of the expression finds the member paths
it uses, and paths used only inside `has()` contribute their presence, not their value. A rule such
as `has(self.a) ? 1 : 0 + ...` then costs one evaluation per shape of object, not one per object.

Kubernetes semantics kept: a runtime error (a missing field read without `has()`) rejects the
object; `message` or `messageExpression` is the message. A rule gpuc cannot evaluate (a Kubernetes
CEL library function cel-python lacks) is reported as a warning, never passed silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
import lark
from celpy.adapter import json_to_cel
from celpy.evaluation import base_functions

from ..cel import environment
from .schema import MISSING, Rule

Outcome = tuple[str, str, str] | None  # (message, hint, severity), None when the rule holds
_WRAPPERS = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
             "member", "primary", "paren_expr"}
_ROOTS = ("self", "oldSelf")


@dataclass(frozen=True)
class Access:
    root: str  # self | oldSelf
    path: tuple[str, ...]
    presence: bool  # only tested with has()


@dataclass(frozen=True)
class Compiled:
    program: Any | None
    error: str  # why gpuc cannot evaluate it ("" when it can)
    accesses: tuple[Access, ...] | None  # None: the rule reads a root as a whole


_MACROS = {"has", "all", "exists", "exists_one", "map", "filter"}
_KNOWN_FUNCTIONS = set(base_functions) | _MACROS


def _functions(tree: Any) -> set[str]:
    """Names of the functions and methods an expression calls."""
    names = set()
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            names.add(str(node.children[0]))
        elif node.data == "member_dot_arg":
            names.add(str(node.children[1]))
    return names


def _unwrap(tree: Any) -> Any:
    while isinstance(tree, lark.Tree) and tree.data in _WRAPPERS and len(tree.children) == 1:
        tree = tree.children[0]
    return tree


def _chain(tree: Any) -> tuple[str, tuple[str, ...]] | None:
    """`self.a.b` -> ("self", ("a", "b")); None for anything that is not a plain member chain."""
    tree = _unwrap(tree)
    if not isinstance(tree, lark.Tree):
        return None
    if tree.data == "ident":
        name = str(tree.children[0])
        return (name, ()) if name in _ROOTS else None
    if tree.data == "member_dot":
        inner = _chain(tree.children[0])
        if inner is None:
            return None
        return inner[0], inner[1] + (str(tree.children[1]),)
    return None


def _accesses(tree: Any) -> tuple[Access, ...] | None:
    found: list[Access] = []
    whole = False

    def walk(node: Any) -> None:
        nonlocal whole
        if not isinstance(node, lark.Tree):
            return
        if node.data == "ident_arg" and str(node.children[0]) == "has" and len(node.children) > 1:
            args = node.children[1]
            chain = _chain(args.children[0]) if isinstance(args, lark.Tree) and len(args.children) == 1 else None
            if chain is not None and chain[1]:
                found.append(Access(chain[0], chain[1], presence=True))
                return
        chain = _chain(node)
        if chain is not None:
            if not chain[1]:
                whole = True  # `self` itself: the rule can see everything
            else:
                found.append(Access(chain[0], chain[1], presence=False))
            return
        for child in node.children:
            walk(child)

    walk(tree)
    return None if whole else tuple(found)


@cache
def compile_rule(text: str) -> Compiled:
    try:
        ast = environment().compile(text)
    except Exception as exc:  # cel-python raises its own and lark's error types
        return Compiled(None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, None)
    missing = sorted(_functions(ast) - _KNOWN_FUNCTIONS)
    if missing:  # Kubernetes CEL libraries (quantity, url, ip, format, ...) cel-python does not have
        return Compiled(None, f"cel-python lacks {', '.join(missing)}", None)
    return Compiled(environment().program(ast), "", _accesses(ast))


def _project(value: Any, access: Access) -> Any:
    """What the rule can observe through one access: how far the path exists and, unless presence-only, the value."""
    current = value
    for depth, name in enumerate(access.path):
        if not isinstance(current, dict) or name not in current:
            return ("missing", depth, type(current).__name__)
        current = current[name]
    return ("present",) if access.presence else ("value", current)


def _key(compiled: Compiled, self_value: Any, old_value: Any) -> str:
    if compiled.accesses is None:
        view: Any = [self_value, None if old_value is MISSING else old_value]
    else:
        view = [_project(self_value if a.root == "self" else old_value, a) for a in compiled.accesses]
    return json.dumps(view, sort_keys=True, default=str)


class CelRules:
    """The rule hook schema validation calls; one instance per check run keeps its memo."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str, str, str], Outcome] = {}

    def __call__(self, rule: Rule, self_value: Any, old_value: Any) -> Outcome:
        compiled = compile_rule(rule.rule)
        if compiled.program is None:
            return (f"gpuc cannot evaluate the rule `{rule.rule}` ({compiled.error}); the API server will",
                    "check this field by hand, or report the rule to the gpuc maintainers", "warning")
        if rule.optional_old_self:
            return (f"gpuc cannot evaluate the rule `{rule.rule}` (optionalOldSelf needs CEL optionals); the API server will",
                    "check this field by hand", "warning")
        key = (rule.rule, rule.message, rule.message_expression, _key(compiled, self_value, old_value))
        if key not in self._memo:
            self._memo[key] = self._evaluate(rule, compiled, self_value, old_value)
        return self._memo[key]

    def _evaluate(self, rule: Rule, compiled: Compiled, self_value: Any, old_value: Any) -> Outcome:
        activation = {"self": json_to_cel(self_value)}
        if old_value is not MISSING:
            activation["oldSelf"] = json_to_cel(old_value)
        assert compiled.program is not None  # __call__ answers rules that did not compile
        try:
            result = compiled.program.evaluate(activation)
        except Exception as exc:  # CELEvalError, and cel-python's internal errors on odd inputs
            text = (str(exc.args[0]) if getattr(exc, "args", None) else str(exc)).split(" (in activation")[0]
            return (f"the CRD rule `{rule.rule}` fails with an error: {text}", _hint(rule), "error")
        if isinstance(result, Exception):
            return (f"the CRD rule `{rule.rule}` fails with an error: {result}", _hint(rule), "error")
        if not isinstance(result, celpy.celtypes.BoolType):
            return (f"the CRD rule `{rule.rule}` returned {type(result).__name__}, not a bool", "", "error")
        if bool(result):
            return None
        return (self._message(rule, activation), _hint(rule), rule.severity)

    @staticmethod
    def _message(rule: Rule, activation: dict[str, Any]) -> str:
        if rule.message_expression:
            compiled = compile_rule(rule.message_expression)
            if compiled.program is not None:
                try:
                    text = compiled.program.evaluate(activation)
                    if isinstance(text, str) and text.strip():
                        return str(text)
                except Exception:  # the API server falls back to message as well
                    pass
        return rule.message or f"failed rule: {rule.rule}"


def _hint(rule: Rule) -> str:
    return f"the CRD's rule: {rule.rule}"
