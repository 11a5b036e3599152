"""Refuse credential-looking values anywhere in an intent.

The rendered tree is committed to git and the Pulumi inputs end up in stack state: a key pasted
into an intent would leak twice. Intents reference Secrets by name; this scan catches the realistic
slip (an `nvapi-...` key in `secrets.ngcApiKey`, a token in chart values) before anything is emitted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from ..diagnostics import Diagnostic
from ..facts import load_table
from ..load.yaml_source import SourceDoc

HINT = ("intents hold Secret names only: create the Secret out of band, e.g.\n"
        "kubectl create secret generic ngc-api-secret --from-literal=NGC_API_KEY=<key>\n"
        "and reference it by name (secrets.ngcApiKey: ngc-api-secret)")
_TOKEN = re.compile(r"^[A-Za-z0-9+=_-]+$")  # no "/": long file paths are not tokens


@lru_cache(maxsize=1)
def _rules() -> tuple[list[tuple[str, re.Pattern[str]]], dict, frozenset[str]]:
    table = load_table("credentials")
    patterns = [(p["name"], re.compile(p["regex"])) for p in table["patterns"]]
    return patterns, table["highEntropy"], frozenset(table["publicKeys"])


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


SHORTEST = 16  # no pattern matches fewer characters, except a password in a URL (which needs an "@")


@lru_cache(maxsize=65536)
def credential_kind(text: str) -> str:
    """What kind of credential `text` looks like, or "" when it does not look like one."""
    if len(text) < SHORTEST and "@" not in text:
        return ""
    patterns, entropy, _ = _rules()
    for name, regex in patterns:
        if regex.search(text):
            return name
    if (len(text) >= entropy["minLength"] and _TOKEN.fullmatch(text) and re.search(r"[A-Za-z]", text)
            and re.search(r"\d", text) and _entropy(text) >= entropy["minEntropy"]):
        return "a random token"
    return ""


def _strings(value: Any) -> Iterator[tuple[tuple, str]]:
    _, _, public = _rules()
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            stack.extend((child, path + (key,)) for key, child in node.items() if key not in public)
        elif isinstance(node, list):
            stack.extend((child, path + (i,)) for i, child in enumerate(node))
        elif isinstance(node, str):
            yield path, node


def _any_credential(value: Any, public: frozenset[str]) -> bool:
    """Whether any string in `value` looks like a credential: the scan of every document, without the
    paths that only a finding needs."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if credential_kind(node):
                return True
        elif isinstance(node, dict):
            stack.extend(child for key, child in node.items() if key not in public)
        elif isinstance(node, list):
            stack.extend(node)
    return False


def scan_document(doc: SourceDoc) -> tuple[list[Diagnostic], set[str]]:
    """Findings for credential-looking values, and the values themselves (to redact from other messages)."""
    findings: list[Diagnostic] = []
    values: set[str] = set()
    if not _any_credential(doc.value, _rules()[2]):
        return findings, values
    for path, text in _strings(doc.value):
        kind = credential_kind(text)
        if kind:
            findings.append(doc.error(path, f"this value looks like {kind}; gpuc never puts secret values into manifests", HINT))
            values.add(text)
    return findings, values
