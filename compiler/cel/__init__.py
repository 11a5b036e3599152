"""The Kubernetes DRA CEL environment for device selectors, on cel-python.

`compile_selector(text)` compiles once per text and returns a `Selector` whose `matches(device)`
memoises results by the device values the expression references (see engine.py);
`check_expression(text, published)` gives the static findings output checks report.
Shared by the offline allocator (compiler/place/allocator) and the output checks (compiler/check).
"""

from __future__ import annotations

from .analysis import Analysis, Ref, analyse
from .attrlist import AttrList
from .engine import CelCompileError, CelEvaluationError, DeviceData, Selector, compile_selector, environment, nesting, parse, stack_for
from .quantity import Quantity, QuantityError, parse_quantity
from .semver import Semver, SemverError
from .static import Problem, Published, cluster_problems, compile_problems


def check_expression(text: str, published: Published | None = None) -> list[Problem]:
    """Every static problem of `text`: compile errors first, then (given `published`) cluster-specific ones."""
    try:
        tree = parse(text)
    except CelCompileError as exc:
        return list(exc.problems)
    with stack_for(nesting(tree)):
        analysis = analyse(tree)
        problems = compile_problems(tree, analysis)
    if published is not None:
        problems.extend(cluster_problems(analysis, published))
    return problems


__all__ = [
    "Analysis", "AttrList", "CelCompileError", "CelEvaluationError", "DeviceData", "Problem", "Published", "Quantity",
    "QuantityError", "Ref", "Selector", "Semver", "SemverError", "analyse", "check_expression", "compile_selector", "environment",
    "parse", "parse_quantity",
]
