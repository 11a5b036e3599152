"""Field-level differences between two JSON-like values, as YAML paths with old -> new."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MISSING = object()


@dataclass(frozen=True)
class FieldChange:
    path: str  # e.g. spec.devices.requests[gpu].exactly.count
    old: Any  # MISSING when added
    new: Any  # MISSING when removed

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.old is not MISSING:
            out["old"] = self.old
        if self.new is not MISSING:
            out["new"] = self.new
        return out


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _named(items: list) -> bool:
    """Lists of objects with unique `name`s (requests, env vars) diff by name, not position."""
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return len(names) == len(items) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def diff_values(old: Any, new: Any, prefix: str = "") -> list[FieldChange]:
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[FieldChange] = []
        for key in list(old) + [k for k in new if k not in old]:
            changes.extend(diff_values(old.get(key, MISSING), new.get(key, MISSING), _join(prefix, str(key))))
        return changes
    if isinstance(old, list) and isinstance(new, list):
        if _named(old) and _named(new):
            return _diff_named(old, new, prefix)
        changes = []
        for i in range(max(len(old), len(new))):
            changes.extend(diff_values(old[i] if i < len(old) else MISSING, new[i] if i < len(new) else MISSING, f"{prefix}[{i}]"))
        return changes
    if old is MISSING and new is MISSING:
        return []
    if old == new and type(old) is type(new):
        return []
    return [FieldChange(prefix or "(value)", old, new)]


def _diff_named(old: list, new: list, prefix: str) -> list[FieldChange]:
    olds = {i["name"]: i for i in old}
    news = {i["name"]: i for i in new}
    changes: list[FieldChange] = []
    for name in list(olds) + [n for n in news if n not in olds]:
        changes.extend(diff_values(olds.get(name, MISSING), news.get(name, MISSING), f"{prefix}[{name}]"))
    return changes


def touches(changes: list[FieldChange], path: str) -> bool:
    """Whether any change lies at or under `path` (e.g. "spec" or "spec.draResources")."""
    return any(c.path == path or c.path.startswith(path + ".") or c.path.startswith(path + "[") for c in changes)
