"""The DRA driver's opaque config API (data/driver_config.yaml), as schemas for one driver line.

The table holds one schema per config kind with per-property `x-gpuc-since`/`x-gpuc-until`; this
module cuts it down to what a given line decodes, and leaves a note where a property was cut so
that "unknown field" can say which driver line has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from . import load_table
from .driver import DriverLine, driver_lines


@dataclass(frozen=True)
class ConfigKind:
    name: str
    driver: str  # the DRA driver name that decodes it (opaque.driver)
    device_type: str  # gpu | mig | vfio | channel | daemon: the devices it may configure
    schema: dict[str, Any]  # structural schema for this driver line, `$ref`s inlined
    webhook_refuses: str = ""  # why the driver's admission webhook refuses every config of this kind, if it does


def config_api_version() -> str:
    return load_table("driver_config")["apiVersion"]


def _available(entry: dict[str, Any], line: DriverLine) -> bool:
    since, until = entry.get("x-gpuc-since", entry.get("since")), entry.get("x-gpuc-until", entry.get("until"))
    return (since is None or line.at_least(str(since))) and (until is None or line.at_most(str(until)))


def _lines_text(entry: dict[str, Any]) -> str:
    since, until = entry.get("x-gpuc-since", entry.get("since")), entry.get("x-gpuc-until", entry.get("until"))
    names = [l.id for l in driver_lines().values()
             if (since is None or l.at_least(str(since))) and (until is None or l.at_most(str(until)))]
    return ", ".join(names) or "no released line"


def _for_line(schema: Any, line: DriverLine, types: dict[str, Any]) -> Any:
    """`schema` with `$ref`s inlined and properties this line lacks replaced by a hint."""
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        extra = {k: v for k, v in schema.items() if k != "$ref" and not k.startswith("x-gpuc-")}
        return _for_line({**types[schema["$ref"]], **extra}, line, types)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("x-gpuc-since", "x-gpuc-until", "x-gpuc-note"):
            continue
        if key == "x-gpuc-unknown-hints":
            out.setdefault(key, value)  # merged with the cut properties' notes below
            continue
        if key == "properties":
            props, hints = {}, dict(schema.get("x-gpuc-unknown-hints") or {})
            for name, prop in value.items():
                if _available(prop, line):
                    props[name] = _for_line(prop, line, types)
                else:
                    hints[name] = prop.get("x-gpuc-note") or f"{name} exists on driver lines {_lines_text(prop)}, not on {line.id}"
            out["properties"] = props
            if hints:
                out["x-gpuc-unknown-hints"] = hints
        elif key in ("items", "additionalProperties"):
            out[key] = _for_line(value, line, types)
        else:
            out[key] = value
    return out


@cache
def config_kinds(line_id: str) -> dict[str, ConfigKind]:
    """Config kinds the driver of line `line_id` decodes, with their schemas for that line."""
    table = load_table("driver_config")
    line = driver_lines()[line_id]
    return {
        name: ConfigKind(name, k["driver"], k["deviceType"], _for_line(k["schema"], line, table["types"]),
                         str(k.get("webhookRefuses") or ""))
        for name, k in table["kinds"].items() if _available(k, line)
    }


def config_kind_lines(name: str) -> str:
    """Driver lines that have config kind `name`, for messages ("" for a kind no line has)."""
    kind = load_table("driver_config")["kinds"].get(name)
    return _lines_text(kind) if kind is not None else ""
