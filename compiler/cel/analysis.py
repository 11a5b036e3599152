"""What a DRA CEL expression reads from `device`, found from its syntax tree.

Two users: the evaluation cache (a selector's result can only change when the values it reads
change, so devices that agree on those values share one evaluation) and the static checks (an
attribute the driver never publishes, a function that does not exist). Anything the walk cannot
pin down (a computed map key, the whole `device`) is recorded as a wider reference, never a
narrower one, so the cache stays exact.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from lark import Token, Tree

from .library import MACROS, TYPE_NAMES

DEVICE_FIELDS = ("driver", "attributes", "capacity")
# Declared in the CEL environment only when DRAConsumableCapacity is on (k8s.io/dynamic-resource-allocation/cel).
CAPACITY_FIELDS = DEVICE_FIELDS + ("allowMultipleAllocations",)
WHOLE_DEVICE = "*"


@dataclass(frozen=True)
class Ref:
    """A part of the device: `driver`, `attributes`/`capacity` (all domains, one domain, or one name), or `*`."""

    field: str
    domain: str | None = None
    name: str | None = None

    def __lt__(self, other: Ref) -> bool:
        """A whole domain sorts before its names (a generated `order=True` compared None with str and raised)."""
        return (self.field, self.domain or "", self.name or "") < (other.field, other.domain or "", other.name or "")

    def __str__(self) -> str:
        if self.field in ("attributes", "capacity") and self.domain is not None:
            return f"{self.domain}/{self.name}" if self.name is not None else f"{self.field}['{self.domain}']"
        return self.field


@dataclass(frozen=True)
class Comparison:
    """`<device value> <op> <literal>`: enough to spot a version or quantity compared as a string or number."""

    ref: Ref
    operator: str
    literal: str  # string | int | uint | float | bool | null | bytes


@dataclass(frozen=True)
class Conversion:
    """`string(x)`, `int(x)`, ...: the argument, and the device value it is when it is exactly one."""

    function: str
    argument: Tree
    ref: Ref | None


CONVERSIONS = frozenset({"string", "int", "uint", "double", "bytes", "bool"})


@dataclass
class Analysis:
    refs: set[Ref] = field(default_factory=set)  # everything the result can depend on
    strict: set[Ref] = field(default_factory=set)  # read outside has(): absence is an evaluation error
    calls: set[tuple[str, bool]] = field(default_factory=set)  # (name, is_method)
    unbound: set[str] = field(default_factory=set)
    comparisons: list[Comparison] = field(default_factory=list)
    conversions: list[Conversion] = field(default_factory=list)


_OPERATORS = {"relation_eq": "==", "relation_ne": "!=", "relation_lt": "<", "relation_le": "<=",
              "relation_gt": ">", "relation_ge": ">=", "relation_in": "in"}
_LITERAL_KINDS = {"STRING_LIT": "string", "MLSTRING_LIT": "string", "INT_LIT": "int", "UINT_LIT": "uint",
                  "FLOAT_LIT": "float", "BOOL_LIT": "bool", "NULL_LIT": "null", "BYTES_LIT": "bytes"}


def analyse(tree: Tree) -> Analysis:
    result = Analysis()
    _walk(tree, frozenset(), False, result)
    return result


def single_path(node: Tree, stop: str) -> Tree | None:
    """Follow single-child trees down to the first `stop` node (e.g. expr -> ... -> literal)."""
    while isinstance(node, Tree):
        if node.data == stop:
            return node
        children = [c for c in node.children if isinstance(c, Tree)]
        if len(children) != 1 or len(node.children) != 1:
            return None
        node = children[0]
    return None


def _literal(node: Tree) -> Token | None:
    lit = single_path(node, "literal")
    return lit.children[0] if lit is not None and lit.children and isinstance(lit.children[0], Token) else None


def _string_literal(node: Tree) -> str | None:
    token = _literal(node)
    if token is None or token.type != "STRING_LIT":
        return None
    try:
        value = ast.literal_eval(str(token))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def unwind(member: Tree) -> tuple[Tree, list[tuple]]:
    """`a.b[c].f(x)` -> (primary a, [("key", "b"), ("index", c) | ("key", lit), ("call", "f", exprlist)])."""
    ops: list[tuple] = []
    node = member.children[0]
    while isinstance(node, Tree) and node.data in ("member_dot", "member_dot_arg", "member_index", "member_object"):
        inner = node.children[0]
        if node.data == "member_dot":
            ops.append(("key", str(node.children[1])))
        elif node.data == "member_dot_arg":
            ops.append(("call", str(node.children[1]), node.children[2] if len(node.children) > 2 else None))
        elif node.data == "member_index":
            key = _string_literal(node.children[1])
            ops.append(("key", key) if key is not None else ("index", node.children[1]))
        else:
            ops.append(("object", node.children[1:]))
        node = inner.children[0] if isinstance(inner, Tree) and inner.data == "member" else inner
    ops.reverse()
    return node, ops


def _device_ref(ops: list[tuple]) -> tuple[Ref, int]:
    """The reference a `device...` chain reads and how many ops it consumed."""
    if not ops or ops[0][0] != "key":
        return Ref(WHOLE_DEVICE), 0
    name = ops[0][1]
    if name not in ("attributes", "capacity"):
        return Ref(name), 1
    if len(ops) < 2 or ops[1][0] != "key":
        return Ref(name), 1
    if len(ops) < 3 or ops[2][0] != "key":
        return Ref(name, ops[1][1]), 2
    return Ref(name, ops[1][1], ops[2][1]), 3


def _exprs(exprlist: Tree | None) -> list[Tree]:
    return [c for c in exprlist.children if isinstance(c, Tree)] if isinstance(exprlist, Tree) else []


def _walk(node: Tree | Token, bound: frozenset[str], in_has: bool, out: Analysis) -> None:
    if not isinstance(node, Tree):
        return
    if node.data == "member":
        _walk_member(node, bound, in_has, out)
        return
    if node.data == "relation" and len(node.children) == 2 and isinstance(node.children[0], Tree) \
            and node.children[0].data in _OPERATORS:
        _note_comparison(node, bound, out)
    for child in node.children:
        _walk(child, bound, in_has, out)


def _walk_member(node: Tree, bound: frozenset[str], in_has: bool, out: Analysis) -> None:
    primary, ops = unwind(node)
    head = primary.children[0] if isinstance(primary, Tree) and primary.data == "primary" and primary.children else primary
    if isinstance(head, Tree) and head.data == "ident":
        name = str(head.children[0])
        if name == "device" and name not in bound:
            ref, _ = _device_ref(ops)
            out.refs.add(ref)
            if not in_has:
                out.strict.add(ref)
        elif name not in bound and name not in TYPE_NAMES:
            out.unbound.add(name)
    elif isinstance(head, Tree) and head.data == "ident_arg":
        fname = str(head.children[0])
        args = head.children[1] if len(head.children) > 1 else None
        if fname == "has":
            for expr in _exprs(args):
                _walk(expr, bound, True, out)
        else:
            out.calls.add((fname, False))
            if fname in CONVERSIONS:
                out.conversions.extend(Conversion(fname, e, _device_value(e, bound)) for e in _exprs(args))
            if args is not None:
                _walk(args, bound, in_has, out)
    else:
        _walk(head, bound, in_has, out)
    for op in ops:
        if op[0] == "index":
            _walk(op[1], bound, False, out)
        elif op[0] == "call":
            name, exprlist = op[1], op[2]
            exprs = _exprs(exprlist)
            variable = single_path(exprs[0], "ident") if exprs else None
            if name in MACROS and len(exprs) >= 2 and variable is not None:
                inner = bound | {str(variable.children[0])}
                for expr in exprs[1:]:
                    _walk(expr, inner, False, out)
            else:
                out.calls.add((name, True))
                for expr in exprs:
                    _walk(expr, bound, False, out)
        elif op[0] == "object":
            for child in op[1]:
                _walk(child, bound, False, out)


def _device_value(node: Tree, bound: frozenset[str]) -> Ref | None:
    """The Ref when `node` is exactly `device.attributes[d].n` / `device.capacity[d].n`, else None."""
    member = single_path(node, "member")
    if member is None:
        return None
    primary, ops = unwind(member)
    head = primary.children[0] if isinstance(primary, Tree) and primary.children else None
    if not (isinstance(head, Tree) and head.data == "ident" and str(head.children[0]) == "device" and "device" not in bound):
        return None
    ref, used = _device_ref(ops)
    return ref if ref.name is not None and used == len(ops) else None


def _note_comparison(node: Tree, bound: frozenset[str], out: Analysis) -> None:
    op_tree, rhs = node.children
    lhs = op_tree.children[0]
    operator = _OPERATORS[op_tree.data]
    for value_side, literal_side in ((lhs, rhs), (rhs, lhs)):
        ref = _device_value(value_side, bound)
        token = _literal(literal_side)
        if ref is not None and token is not None:
            out.comparisons.append(Comparison(ref, operator, _LITERAL_KINDS.get(token.type, token.type)))
