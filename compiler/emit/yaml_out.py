"""Deterministic YAML text: identical objects give identical bytes on every machine and run.

gpuc writes tens of thousands of manifests per render, and PyYAML's emitter dominated render time,
so this is a small emitter for the only values manifests hold (maps with string keys, lists, strings,
numbers, booleans, null). It never depends on whether libyaml is installed. Strings are written
plain when YAML would read them back as the same string, as a literal block when they span lines,
and JSON-quoted otherwise (a JSON string is a valid YAML double-quoted scalar). Tests round-trip
every emitted document through a YAML parser.

Top-level and metadata keys come in the conventional Kubernetes order; everything else keeps the
order the compiler built it in (which never depends on hashing or file-system order).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

import yaml

TOP = ("apiVersion", "kind", "metadata", "spec", "data")
META = ("name", "namespace", "labels", "annotations")

_PLAIN_CANDIDATE = re.compile(r"^[A-Za-z0-9_./$(][A-Za-z0-9_./:@=+$()<>,'# -]*$")
_RESOLVER = yaml.resolver.Resolver()
# Characters a YAML reader refuses raw, plus the YAML 1.1 line breaks (NEL, LS, PS) that would fold a quoted string.
_UNSAFE = re.compile("[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_STR_TAG = "tag:yaml.org,2002:str"


def _plain(text: str) -> bool:
    """Whether `text` can be written without quotes and still read back as this very string."""
    if not _PLAIN_CANDIDATE.fullmatch(text) or text.endswith((" ", ":")) or ": " in text or " #" in text:
        return False
    return _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG


@lru_cache(maxsize=65536)
def _text(value: str) -> str:
    """A string scalar as written: keys and most values repeat across thousands of manifests."""
    return value if _plain(value) else _quote(value)


def _quote(text: str) -> str:
    """JSON-quote (a valid YAML double-quoted scalar), escaping what JSON leaves raw but YAML refuses."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000 else f"\\U{ord(m.group()):08x}", quoted)


def _block_ok(text: str) -> bool:
    lines = text.split("\n")
    return (not text.startswith((" ", "\n")) and "\r" not in text
            and all(line == line.rstrip() and line.isprintable() for line in lines))


def _scalar(value: Any) -> str:
    if value.__class__ is str:
        return _text(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        return text.replace("e", ".0e") if "e" in text and "." not in text else text  # YAML 1.1 floats need a dot
    if isinstance(value, str):  # a str subclass (an enum's value): not cached
        return value if _plain(value) else _quote(value)
    raise TypeError(f"cannot emit {type(value).__name__} as YAML")


def _block(text: str, indent: str) -> str:
    chomp = "+" if text.endswith("\n\n") else "" if text.endswith("\n") else "-"
    body = text[:-1] if text.endswith("\n") and chomp == "" else text
    lines = body.split("\n") if chomp != "+" else text.split("\n")[:-1]
    return "|" + chomp + "\n" + "\n".join((indent + line) if line else "" for line in lines)


def _emit(value: Any, indent: str, out: list[str]) -> None:
    """Append the block-style YAML of a map or list whose items start at `indent`."""
    if isinstance(value, dict):
        for key, child in value.items():
            k = _text(key) if key.__class__ is str else _scalar(str(key))
            if isinstance(child, dict) and child:
                out.append(f"{indent}{k}:\n")
                _emit(child, indent + "  ", out)
            elif isinstance(child, list) and child:
                out.append(f"{indent}{k}:\n")
                _emit(child, indent, out)  # PyYAML style: list items align with the key
            elif isinstance(child, str) and "\n" in child and _block_ok(child):
                out.append(f"{indent}{k}: {_block(child, indent + '  ')}\n")
            else:
                out.append(f"{indent}{k}: {_text(child) if child.__class__ is str else _empty(child) or _scalar(child)}\n")
    else:
        for item in value:
            if isinstance(item, dict) and item:
                first = len(out)
                _emit(item, indent + "  ", out)
                out[first] = indent + "- " + out[first][len(indent) + 2:]
            elif isinstance(item, list) and item:
                first = len(out)
                _emit(item, indent + "  ", out)
                out[first] = indent + "- " + out[first][len(indent) + 2:]
            elif isinstance(item, str) and "\n" in item and _block_ok(item):
                out.append(f"{indent}- {_block(item, indent + '  ')}\n")
            else:
                out.append(f"{indent}- {_empty(item) or _scalar(item)}\n")


def _empty(value: Any) -> str:
    if isinstance(value, dict) and not value:
        return "{}"
    if isinstance(value, list) and not value:
        return "[]"
    return ""


def dump(value: Any) -> str:
    if isinstance(value, (dict, list)) and value:
        out: list[str] = []
        _emit(value, "", out)
        return "".join(out)
    return (_empty(value) or _scalar(value)) + "\n"


def _ordered(d: dict[str, Any], first: tuple[str, ...]) -> dict[str, Any]:
    out = {k: d[k] for k in first if k in d}
    out.update({k: v for k, v in d.items() if k not in out})
    return out


def canonical(manifest: dict[str, Any]) -> dict[str, Any]:
    out = _ordered(manifest, TOP)
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = _ordered(out["metadata"], META)
    return out


def dump_manifest(manifest: dict[str, Any]) -> str:
    return dump(canonical(manifest))
