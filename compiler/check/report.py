"""Findings about emitted objects, reported at the intent line a user has to change.

Every object remembers the intent document it came from (`KubeObject.origin`) and, recorded while it
was built, which intent field produced which part of it (`KubeObject.sources`): a bad selector points
at `spec.gpu.require`, a bad interval at `spec.gpu.timeSlicing`, a node label at its pool. The longest
recorded prefix of the finding's path wins, and of its candidates the first the user actually wrote;
a string value that appears verbatim in that part of the intent (a `require.cel` expression, a node
name) narrows it to the exact line.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import Diagnostic, Path, format_path, parse_path
from ..lower.graph import KubeObject
from .model import Finding, value_at


def intent_path(obj: KubeObject, object_path: Path) -> Path:
    """The intent field that produced `object_path` of `obj` (or the document itself)."""
    recorded = {parse_path(k): v for k, v in obj.sources.items()}
    for length in range(len(object_path), -1, -1):
        candidates = [parse_path(c) for c in recorded.get(tuple(object_path[:length]), ())]
        if candidates:
            return next((c for c in candidates if c in obj.origin.lines), candidates[-1])
    return ()


def _find_string(value: Any, needle: str, path: Path) -> Path | None:
    if isinstance(value, str):
        return path if value == needle else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found = _find_string(child, needle, path + (key,))
        if found is not None:
            return found
    return None


def to_diagnostic(finding: Finding) -> Diagnostic:
    obj = finding.obj
    origin = obj.origin
    where = intent_path(obj, finding.path)
    value = value_at(obj.manifest, finding.path)
    if isinstance(value, str) and len(value) >= 3 and where:
        exact = _find_string(value_at(origin.value, where), value, where)
        if exact is not None:
            where = exact
    name = f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
    field = f" {format_path(finding.path)}" if finding.path else ""
    message = f"{obj.kind} {name}{field}: {finding.message}"
    return Diagnostic(origin.file, origin.line_of(where), format_path(where), message, finding.hint, finding.severity)
