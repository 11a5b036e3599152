"""`gpuc schema --markdown`: the intent format reference (docs/reference/intent-format.md), written from the
JSON Schema the pydantic models give, so the page and `gpuc schema` cannot drift (a test compares the page).

Every field is one row under its path as users write it (`spec.nodePools[].gpu.model`): type, default,
allowed values and the description the models and `schema.DESCRIPTIONS` carry.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

REGENERATE = "gpuc schema --markdown > docs/reference/intent-format.md"

# One example per kind, proved twice: the generator validates each with its model, and the docs snippet test
# (tests/test_first_hour.py) compiles the page's examples as one fleet.
EXAMPLES: dict[str, str] = {
    "Cluster": """\
apiVersion: gpuc.dev/v1alpha1
kind: Cluster
metadata: {name: prod-east}
spec:
  kubernetesVersion: "1.36"
  draDriver: {version: "0.5.1", nvidiaDriverRoot: /run/nvidia/driver}
  gpuOperator: {mode: helm, version: v26.7.0}
  nimOperator: {version: "3.1.2"}
  nodePools:
  - {name: h100, nodes: 4, gpu: {model: H100-80GB, count: 8}}
  - {name: a100-mig, nodes: 2, gpu: {model: A100-80GB, count: 8}, mig: {layout: all-balanced}}
  gitops:
    repoURL: https://git.example.com/platform/gpu-fleet.git
    path: rendered/prod-east
    destination: {name: prod-east}
  acknowledge:
  - warning: driver-upgrade
    reason: GPU nodes are drained before every GPU driver upgrade
""",
    "GpuWorkload": """\
apiVersion: gpuc.dev/v1alpha1
kind: GpuWorkload
metadata: {name: llama-8b, namespace: nim-service}
spec:
  clusters: [prod-east]
  replicas: 2
  model: {image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3, parameters: 8B, precision: bf16}
  gpu: {count: auto, class: hopper.gpuc.dev}
  cache: {accessMode: ReadWriteMany}
  secrets: {ngcApiKey: ngc-api-secret, imagePull: ngc-secret}
""",
    "GpuDeviceClass": """\
apiVersion: gpuc.dev/v1alpha1
kind: GpuDeviceClass
metadata: {name: hopper.gpuc.dev}
spec:
  require: {architecture: [Hopper], minMemory: 79Gi}
""",
}

INTRO = """\
Every document a fleet holds has `apiVersion: gpuc.dev/v1alpha1` and one of the kinds below: `Cluster` documents
in `clusters/*.yaml`, `GpuWorkload` and `GpuDeviceClass` documents in `workloads/**/*.yaml` (see
[fleet layout](fleet-layout.md)). Fields are written in camelCase as shown; a field gpuc does not know is an
error naming its line, and values are strict (`replicas: "2"` and `nodes: true` are refused, not converted).
`gpuc schema` prints the same as JSON Schema for editors (`# yaml-language-server: $schema=gpuc-schema.json`).

A path `a[]` is a list of items, `a.<key>` a map. *Required* fields have no default; a field whose default is
*unset* may be left out and means nothing is configured."""


def intent_reference(schema: dict[str, Any], examples: dict[str, str] = EXAMPLES) -> str:
    """The reference page of the kinds in `schema` (emit.schema.input_schema()), one section per kind."""
    definitions = schema["$defs"]
    by_ref = {ref: kind for kind, ref in schema["discriminator"]["mapping"].items()}
    kinds = [by_ref[option["$ref"]] for option in schema["oneOf"]]  # the order `gpuc schema` gives
    missing = [k for k in kinds if k not in examples]
    if missing:
        raise ValueError(f"no example for kind {', '.join(missing)}: add one to compiler.emit.reference.EXAMPLES")
    lines = [f"# Intent format reference\n\n<!-- generated from gpuc's models by `{REGENERATE}`; do not edit -->\n",
             INTRO, "", "Kinds: " + ", ".join(f"[{k}](#{k.lower()})" for k in kinds) + ".", ""]
    for kind in kinds:
        ref = schema["discriminator"]["mapping"][kind].rpartition("/")[2]
        definition = definitions[ref]
        lines += [f"## {kind}", ""]
        if definition.get("description"):
            lines += [_text(definition["description"]), ""]
        lines += ["| field | type | default | allowed | description |", "|---|---|---|---|---|"]
        lines += [_row(path, prop, required) for path, prop, required in _fields(definition, definitions, "")]
        lines += ["", f"Example ({kind}):", "", "```yaml", examples[kind].rstrip("\n"), "```", ""]
    return "\n".join(lines)


def _fields(definition: dict[str, Any], definitions: dict[str, Any], prefix: str) -> list[tuple[str, dict[str, Any], bool]]:
    """(path, property, required) for every property, depth first, in the models' field order."""
    out: list[tuple[str, dict[str, Any], bool]] = []
    required = set(definition.get("required", ()))
    for name, prop in (definition.get("properties") or {}).items():
        path = f"{prefix}{name}"
        out.append((path, prop, name in required))
        for suffix, nested in _nested(prop, definitions):
            out += _fields(nested, definitions, f"{path}{suffix}.")
    return out


def _nested(prop: dict[str, Any], definitions: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The object definitions a property holds, with the path suffix that reaches them ('', '[]', '.<key>')."""
    out: list[tuple[str, dict[str, Any]]] = []
    for option in prop.get("anyOf", [prop]):
        if "$ref" in option:
            out.append(("", _deref(option, definitions)))
        elif option.get("type") == "array" and "$ref" in option.get("items", {}):
            out.append(("[]", _deref(option["items"], definitions)))
        elif option.get("type") == "object" and isinstance(values := option.get("additionalProperties"), dict) and "$ref" in values:
            out.append((".<key>", _deref(values, definitions)))
    return out


def _deref(ref: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    return definitions[ref["$ref"].rpartition("/")[2]]


def _row(path: str, prop: dict[str, Any], required: bool) -> str:
    options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
    kind = " or ".join(dict.fromkeys(_type(o) for o in options))
    allowed = "; ".join(a for a in (_allowed(o) for o in options) if a)
    cells = [f"`{path}`", kind, _default(prop, required, options), allowed, _text(prop.get("description", ""))]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _type(option: dict[str, Any]) -> str:
    if "$ref" in option:
        return "object"
    kind = option.get("type", "any")
    if kind == "array":
        return f"list of {_type(option.get('items', {}))}"
    if kind == "object":
        values = option.get("additionalProperties")
        if isinstance(values, dict) and values:
            return f"map of {_type(values)}"
        if option.get("patternProperties"):
            return "map of " + " or ".join(_type(v) for v in option["patternProperties"].values())
        return "map" if values is not False else "object"
    return {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string"}.get(kind, kind)


def _allowed(option: dict[str, Any]) -> str:
    parts: list[str] = []
    if "const" in option:
        parts.append(f"`{option['const']}`")
    if "enum" in option:
        parts.append(", ".join(f"`{v}`" for v in option["enum"]))
    low, high = option.get("minimum"), option.get("maximum")
    if low is not None or high is not None:
        parts.append(f"{low if low is not None else '...'} to {high if high is not None else '...'}")
    for key, word in (("minItems", "at least {} item(s)"), ("maxItems", "at most {} items"),
                      ("minLength", "at least {} characters"), ("maxLength", "at most {} characters")):
        if key in option and not (key == "minLength" and option[key] <= 1):
            parts.append(word.format(option[key]))
    if "pattern" in option:
        parts.append(f"matches `{option['pattern']}`")
    if option.get("examples"):
        parts.append("e.g. " + ", ".join(f"`{e}`" for e in option["examples"]))
    items = option.get("items")
    if option.get("type") == "array" and isinstance(items, dict) and "$ref" not in items:
        inner = _allowed(items)
        if inner:
            parts.append(f"each: {inner}")
    return ", ".join(parts)


def _default(prop: dict[str, Any], required: bool, options: list[dict[str, Any]]) -> str:
    if required:
        return "*required*"
    if "default" not in prop:  # a default_factory: an empty list or map
        return "`[]`" if any(o.get("type") == "array" for o in options) else "`{}`"
    value = prop["default"]
    if value is None:
        return "*unset*"
    if isinstance(value, dict):
        return "its fields' defaults"
    return f"`{value if isinstance(value, str) and value else json.dumps(value)}`"


def _text(text: str) -> str:
    return " ".join(text.split())


def check_examples(examples: dict[str, str] = EXAMPLES) -> None:
    """Each example is a valid document of its kind (raises pydantic's ValidationError otherwise)."""
    from ..validate.intents import KINDS

    for kind, text in examples.items():
        KINDS[kind].model_validate(yaml.safe_load(text))
