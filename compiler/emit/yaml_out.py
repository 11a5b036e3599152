"""Deterministic YAML text: identical objects give identical bytes on every machine and run.

Top-level and metadata keys come in the conventional Kubernetes order; everything else keeps the
order the compiler built it in (which never depends on hashing or file-system order). No anchors,
no line folding (CEL expressions stay on one line), block style for multi-line strings.
"""

from __future__ import annotations

from typing import Any

import yaml

TOP = ("apiVersion", "kind", "metadata", "spec", "data")
META = ("name", "namespace", "labels", "annotations")


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def _ordered(d: dict[str, Any], first: tuple[str, ...]) -> dict[str, Any]:
    out = {k: d[k] for k in first if k in d}
    out.update({k: v for k, v in d.items() if k not in out})
    return out


def canonical(manifest: dict[str, Any]) -> dict[str, Any]:
    out = _ordered(manifest, TOP)
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = _ordered(out["metadata"], META)
    return out


def dump(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=2**31 - 1)


def dump_manifest(manifest: dict[str, Any]) -> str:
    return dump(canonical(manifest))
