"""The official schemas of Kubernetes' built-in kinds, per minor version, from kubernetes-validate.

kubernetes-validate bundles the API server's OpenAPI as JSON schemas for Kubernetes 1.25 and later;
its `-strict` variant forbids unknown fields. Its own `validate()` re-reads and re-resolves the
schema files for every object, so gpuc reads `_definitions.json` once per version, indexes the kinds
it declares (`x-kubernetes-group-version-kind`) and compiles each kind's schema once.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from .schema import Compiler, Node

PACKAGE = "kubernetes_validate"


class SchemasUnavailable(LookupError):
    """kubernetes-validate has no schemas for this Kubernetes version."""


@dataclass(frozen=True)
class BuiltinKinds:
    """The kinds one Kubernetes minor version serves: (group, version, kind) -> definition name."""

    minor: str
    kinds: dict[tuple[str, str, str], str]
    definitions: dict[str, dict]
    groups: frozenset[str]

    def serves_group(self, group: str) -> bool:
        return group in self.groups

    def versions_of(self, group: str, kind: str) -> list[str]:
        return sorted(v for g, v, k in self.kinds if g == group and k == kind)


def _schema_root() -> Path:
    """The schemas kubernetes-validate ships, found without importing it (its import pulls in jsonschema and
    attrs, a tenth of a second a render that only reads the JSON files beside it has no use for)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return Path(str(resources.files(PACKAGE))).joinpath("kubernetes-json-schema")  # the import says what is wrong
    return Path(spec.submodule_search_locations[0], "kubernetes-json-schema")


def available_versions() -> list[str]:
    names = [p.name for p in _schema_root().iterdir() if p.name.endswith("-local-strict")]
    return sorted((n.removeprefix("v").split(".0-local")[0] for n in names), key=lambda v: tuple(int(x) for x in v.split(".")))


@cache
def builtin_kinds(minor: str) -> BuiltinKinds:
    """Index the definitions of Kubernetes `minor` ("1.34"); raises SchemasUnavailable."""
    path = _schema_root().joinpath(f"v{minor}.0-local-strict", "_definitions.json")
    if not path.is_file():
        raise SchemasUnavailable(
            f"the installed kubernetes-validate has no schemas for Kubernetes {minor} "
            f"(it has {', '.join(available_versions())}); upgrade kubernetes-validate")
    definitions = json.loads(path.read_text(encoding="utf-8"))["$defs"]
    kinds = {}
    for name, schema in definitions.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            kinds[(gvk["group"], gvk["version"], gvk["kind"])] = name
    return BuiltinKinds(minor, kinds, definitions, frozenset(g for g, _, _ in kinds))


@cache
def _compiler(minor: str) -> Compiler:
    definitions = builtin_kinds(minor).definitions

    def resolve(ref: str) -> dict:
        return definitions[ref.rsplit("/", 1)[-1]]

    return Compiler(resolve, structural=False)


@cache
def builtin_schema(minor: str, group: str, version: str, kind: str) -> Node | None:
    """The compiled schema of a built-in kind, or None when that version does not serve it."""
    name = builtin_kinds(minor).kinds.get((group, version, kind))
    if name is None:
        return None
    return _compiler(minor).compile({"$ref": f"#/$defs/{name}"})
