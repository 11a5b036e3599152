"""Static checks of a DRA CEL expression: what the API server refuses at admission (syntax,
undeclared names, unknown device fields, a non-bool result) and what can never work on a given
cluster (attributes its driver never publishes, versions or quantities compared as plain values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from lark import Tree

from .analysis import DEVICE_FIELDS, WHOLE_DEVICE, Analysis, Ref, unwind
from .library import BUILTIN, FUNCTIONS, LIST_FUNCTIONS, UNIMPLEMENTED

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    severity: Severity
    code: str  # syntax | undeclared | unknown-field | unsupported | not-bool | unknown-domain | unpublished | type
    message: str
    ref: Ref | None = None


@dataclass(frozen=True)
class Published:
    """What the drivers of a cluster publish: domain -> attribute name -> type (string|int|bool|version),
    and domain -> capacity names. Capacity names may end in `*` for numbered families (memorySlice*)."""

    attributes: Mapping[str, Mapping[str, str]]
    capacities: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def has_capacity(self, domain: str, name: str) -> bool:
        names = self.capacities.get(domain, frozenset())
        return name in names or any(n.endswith("*") and name.startswith(n[:-1]) and name[len(n) - 1:].isdigit() for n in names)


_RETURNS = {"compareTo": "int", "sign": "int", "asInteger": "int", "major": "int", "minor": "int", "patch": "int",
            "size": "int", "quantity": "Quantity", "add": "Quantity", "sub": "Quantity", "semver": "Semver",
            "asApproximateFloat": "double", "includes": "bool", "lowerAscii": "string", "upperAscii": "string", "string": "string",
            "int": "int", "double": "double"}
_NON_BOOL_LITERALS = {"STRING_LIT": "string", "MLSTRING_LIT": "string", "INT_LIT": "int", "UINT_LIT": "uint",
                      "FLOAT_LIT": "double", "NULL_LIT": "null", "BYTES_LIT": "bytes"}


def compile_problems(tree: Tree, analysis: Analysis, fields: tuple[str, ...] = DEVICE_FIELDS,
                     gated: frozenset[str] = frozenset()) -> list[Problem]:
    """What the API server's compiler would refuse, plus functions gpuc cannot evaluate. `gated`: the
    feature-gated functions declared (`includes` with DRAListTypeAttributes)."""
    problems: list[Problem] = []
    for name in sorted(analysis.unbound):
        problems.append(Problem("error", "undeclared", f"undeclared reference to '{name}' (the only variable is `device`)"))
    for ref in sorted(analysis.refs):
        if ref.field not in fields and ref.field != WHOLE_DEVICE:
            extra = " (it needs the DRAConsumableCapacity feature gate, alpha and off in 1.34)" if ref.field == "allowMultipleAllocations" else ""
            problems.append(Problem("error", "unknown-field", f"device has no field '{ref.field}'{extra}; "
                                    f"fields: {', '.join(fields)}", ref))
    for name, _ in sorted(analysis.calls):
        if name in FUNCTIONS or name in BUILTIN or name in gated:
            continue
        if name in LIST_FUNCTIONS:
            problems.append(Problem("error", "undeclared", f"undeclared reference to function '{name}': it needs the "
                                    "DRAListTypeAttributes feature gate (alpha, off by default)"))
            continue
        if name in UNIMPLEMENTED:
            problems.append(Problem("error", "unsupported", f"function '{name}' is part of the Kubernetes CEL environment, "
                                    "but gpuc's evaluator does not implement it, so gpuc cannot evaluate this selector"))
        else:
            problems.append(Problem("error", "undeclared", f"undeclared reference to function '{name}'"))
    for conversion in analysis.conversions:
        kind = result_kind(conversion.argument)
        if kind in ("Quantity", "Semver"):
            problems.append(_no_conversion(conversion.function, kind, conversion.ref))
    kind = result_kind(tree)
    if kind not in ("bool", "dyn"):
        problems.append(Problem("error", "not-bool", f"a selector must evaluate to bool; this expression is a {kind}"))
    return problems


def _no_conversion(function: str, kind: str, ref: Ref | None) -> Problem:
    """Kubernetes' CEL libraries define no conversion of a Quantity or Semver to a string or number."""
    how = "q.compareTo(quantity('80Gi')) == 0, or asInteger()" if kind == "Quantity" else \
        "v.compareTo(semver('1.2.3')) == 0, or major()/minor()/patch()"
    return Problem("error", "undeclared", f"found no matching overload for '{function}' applied to '({kind})': Kubernetes' "
                   f"CEL has no {function}() of a {kind}; compare it instead: {how}", ref)


def result_kind(tree: Tree) -> str:
    """A best-effort static type of the whole expression: bool, dyn (unknown) or a concrete non-bool type."""
    node = tree
    while isinstance(node, Tree):
        children = [c for c in node.children if isinstance(c, Tree)]
        if node.data == "expr" and len(node.children) > 1:
            return "dyn"  # a ternary: both branches would need checking
        if node.data in ("conditionalor", "conditionaland") and len(node.children) > 1:
            return "bool"
        if node.data == "relation" and len(node.children) > 1:
            return "bool"
        if node.data in ("addition", "multiplication") and len(node.children) > 1:
            return "number, string or list"
        if node.data == "unary" and len(node.children) > 1:
            return "bool" if isinstance(node.children[0], Tree) and node.children[0].data == "unary_not" else "int or double"
        if node.data == "literal":
            token = node.children[0]
            kind = getattr(token, "type", "")
            return "bool" if kind == "BOOL_LIT" else _NON_BOOL_LITERALS.get(kind, "dyn")
        if node.data == "member":
            return _member_kind(node)
        if node.data in ("list_lit", "map_lit"):
            return "list" if node.data == "list_lit" else "map"
        if len(children) != 1:
            return "dyn"
        node = children[0]
    return "dyn"


def _member_kind(member: Tree) -> str:
    primary, ops = unwind(member)
    if ops and ops[-1][0] == "call":
        return _RETURNS.get(ops[-1][1], "dyn")
    head = primary.children[0] if isinstance(primary, Tree) and primary.children else None
    if isinstance(head, Tree) and head.data == "ident_arg" and not ops:
        return _RETURNS.get(str(head.children[0]), "dyn")
    if isinstance(head, Tree) and head.data == "ident" and str(head.children[0]) == "device":
        if ops == [("key", "driver")]:
            return "string"
        if len(ops) == 3 and ops[0] == ("key", "capacity") and ops[2][0] == "key":
            return "Quantity"
        if len(ops) <= 2 and ops and ops[0][0] == "key":
            return "map"
    if isinstance(head, Tree) and head.data == "literal" and not ops:
        return result_kind(head)
    if isinstance(head, Tree) and head.data == "paren_expr" and not ops:
        return result_kind(head.children[0])
    return "dyn"


def cluster_problems(analysis: Analysis, published: Published) -> list[Problem]:
    """References to what the cluster's drivers never publish, and values compared with the wrong kind of literal."""
    problems: list[Problem] = []
    for ref in sorted(analysis.strict):
        if ref.field not in ("attributes", "capacity") or ref.domain is None:
            continue
        domains = published.attributes if ref.field == "attributes" else published.capacities
        what = "attribute" if ref.field == "attributes" else "capacity"
        if ref.domain not in domains:
            problems.append(Problem("error", "unknown-domain",
                                    f"no driver of this cluster publishes {what}s in domain '{ref.domain}'", ref))
        elif ref.name is not None:
            known = ref.name in published.attributes[ref.domain] if ref.field == "attributes" else published.has_capacity(ref.domain, ref.name)
            if not known:
                problems.append(Problem("error", "unpublished", f"{what} {ref} is not published by this driver version; "
                                        "reading it fails evaluation on every device", ref))
    for conversion in analysis.conversions:
        converted = conversion.ref
        if converted is not None and converted.field == "attributes" and converted.domain is not None and converted.name is not None \
                and published.attributes.get(converted.domain, {}).get(converted.name) == "version":
            problems.append(_no_conversion(conversion.function, "Semver", converted))
    for cmp in analysis.comparisons:

        ref = cmp.ref
        if ref.field == "capacity" and cmp.literal in ("int", "uint", "float", "string"):
            problems.append(Problem("error", "type", f"capacity {ref} is a quantity; `{cmp.operator}` against a {cmp.literal} "
                                    "is never true or an error: use .compareTo(quantity('...'))", ref))
        elif ref.field == "attributes" and ref.domain is not None and ref.name is not None:
            declared = published.attributes.get(ref.domain, {}).get(ref.name)
            if declared == "version" and cmp.literal in ("string", "int", "float"):
                problems.append(Problem("error", "type", f"attribute {ref} is a version; `{cmp.operator}` against a {cmp.literal} "
                                        "is never true or an error: use .compareTo(semver('...'))", ref))
            elif declared in ("string", "int", "bool") and cmp.literal not in (_kind_literal(declared), "null") \
                    and cmp.operator in ("==", "!="):
                problems.append(Problem("warning", "type", f"attribute {ref} is {_article(declared)}; comparing it with a "
                                        f"{cmp.literal} is always {'false' if cmp.operator == '==' else 'true'}", ref))
    return problems


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _kind_literal(declared: str) -> str:
    return {"string": "string", "int": "int", "bool": "bool"}[declared]

