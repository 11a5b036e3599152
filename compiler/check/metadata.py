"""Object metadata the way the API server's ValidateObjectMeta sees it, for every kind.

Schemas only say "a string"; the API server also refuses names that are not DNS names, label keys
and values outside the qualified-name syntax, and annotations over 256 KiB in total. Intents are
DNS-checked on input, but names gpuc derives (hashes, prefixes, node names) are checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..facts.platform import object_meta_rules
from ..validate.types import DNS_LABEL, DNS_SUBDOMAIN
from .model import ClusterContext, Finding

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_FORMATS = {"dnsLabel": (DNS_LABEL, "a DNS label (at most 63 lower-case letters, digits and '-')"),
            "dnsSubdomain": (DNS_SUBDOMAIN, "a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)")}


@lru_cache(maxsize=4096)
def qualified_name_problem(key: str) -> str:
    """Why `key` is not a label or annotation key (`[prefix/]name`), or ""."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "a key has at most one '/'"
    if prefix and not DNS_SUBDOMAIN.fullmatch(prefix):
        return f"prefix '{prefix}' is not a DNS subdomain"
    if not name or len(name) > 63 or not _NAME_PART.fullmatch(name):
        return f"name part '{name}' must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    return ""


def _check_map(obj, meta: dict, field: str, values_are_labels: bool) -> Iterable[Finding]:
    entries = meta.get(field)
    if entries is None:
        return
    if not isinstance(entries, dict):
        return  # the schema check reports the type
    for key, value in entries.items():
        problem = qualified_name_problem(str(key))
        if problem:
            yield Finding(obj, ("metadata", field, key), f"invalid {field[:-1]} key: {problem}")
        if values_are_labels and isinstance(value, str) and value and (len(value) > 63 or not _NAME_PART.fullmatch(value)):
            yield Finding(obj, ("metadata", field, key),
                          f"invalid label value {value!r}: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")


def _annotation_bytes(annotations: Any) -> int:
    if not isinstance(annotations, dict):
        return 0
    return sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())


def check_metadata(ctx: ClusterContext) -> Iterable[Finding]:
    rules = object_meta_rules()
    for obj in ctx.objects:
        meta = obj.manifest.get("metadata")
        if not isinstance(meta, dict):
            yield Finding(obj, ("metadata",), "every object needs metadata with a name")
            continue
        name = meta.get("name")
        pattern, what = _FORMATS[rules.name_format_of(obj.kind)]
        if not isinstance(name, str) or not name:
            yield Finding(obj, ("metadata", "name"), "metadata.name is required")
        elif not pattern.fullmatch(name):
            yield Finding(obj, ("metadata", "name"), f"name {name!r} is not {what}")
        namespace = meta.get("namespace")
        if isinstance(namespace, str) and namespace and not DNS_LABEL.fullmatch(namespace):
            yield Finding(obj, ("metadata", "namespace"), f"namespace {namespace!r} is not a DNS label")
        yield from _check_map(obj, meta, "labels", values_are_labels=True)
        yield from _check_map(obj, meta, "annotations", values_are_labels=False)
        size = _annotation_bytes(meta.get("annotations"))
        if size > rules.annotations_total_bytes:
            yield Finding(obj, ("metadata", "annotations"),
                          f"annotations total {size} bytes; the API server accepts at most {rules.annotations_total_bytes}")
