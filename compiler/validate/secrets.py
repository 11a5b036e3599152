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
def credential_kind(text: str, public: bool = False) -> str:
    """What kind of credential `text` looks like, or "" when it does not look like one. A `public` value (under
    a key like caBundle: certificates, random-looking by nature) is held only to the patterns: a private key
    block or a token there is still a credential."""
    if len(text) < SHORTEST and "@" not in text:
        return ""
    patterns, entropy, _ = _rules()
    for name, regex in patterns:
        if regex.search(text):
            return name
    if (not public and len(text) >= entropy["minLength"] and _TOKEN.fullmatch(text) and re.search(r"[A-Za-z]", text)
            and re.search(r"\d", text) and _entropy(text) >= entropy["minEntropy"]):
        return "a random token"
    return ""


def _strings(value: Any) -> Iterator[tuple[tuple, str, bool, str]]:
    """(path, text, public, "key" or "value") of every string in `value`: each mapping key (at the path it
    names) and each value; everything under a public key is public."""
    _, _, public_keys = _rules()
    stack: list[tuple[Any, tuple, bool]] = [(value, (), False)]
    while stack:
        node, path, public = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                yield path + (key,), key, public, "key"
                stack.append((child, path + (key,), public or key in public_keys))
        elif isinstance(node, list):
            stack.extend((child, path + (i,), public) for i, child in enumerate(node))
        elif isinstance(node, str):
            yield path, node, public, "value"


def _any_credential(value: Any, public_keys: frozenset[str]) -> bool:
    """Whether any string in `value` (a key or a value) looks like a credential: the scan of every document,
    without the paths that only a finding needs."""
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, public = stack.pop()
        if isinstance(node, str):
            if credential_kind(node, public):
                return True
        elif isinstance(node, dict):
            for key, child in node.items():
                if credential_kind(key, public):
                    return True
                stack.append((child, public or key in public_keys))
        elif isinstance(node, list):
            stack.extend((child, public) for child in node)
    return False


def redact_known(text: str) -> str:
    """`text` with whatever matches a credential pattern replaced: the last line of defence for messages that
    quote input before the documents are scanned (a YAML error quoting a duplicate key)."""
    for _, regex in _rules()[0]:
        text = regex.sub("<redacted>", text)
    return text


def redacted(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [Diagnostic(d.file, d.line, redact_known(d.path), redact_known(d.message), redact_known(d.hint), d.severity, d.code, d.rule)
            for d in diagnostics]


def scan_document(doc: SourceDoc) -> tuple[list[Diagnostic], set[str]]:
    """Findings for credential-looking values, and the values themselves (to redact from other messages)."""
    findings: list[Diagnostic] = []
    values: set[str] = set()
    if not _any_credential(doc.value, _rules()[2]):
        return findings, values
    for path, text, public, what in _strings(doc.value):
        kind = credential_kind(text, public)
        if kind:
            findings.append(doc.error(path, f"this {what} looks like {kind}; gpuc never puts secret values into manifests", HINT))
            values.add(text)
    return findings, values
