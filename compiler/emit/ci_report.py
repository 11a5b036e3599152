"""Diagnostics in the formats CI systems read: GitHub workflow annotations and SARIF 2.1.0 (code scanning).

Both name the file as the diagnostic shows it (relative to the working directory, which in CI is the
repository checkout), so an annotation lands on the line of the intent that caused it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..diagnostics import Diagnostic

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
GENERIC_RULE = "gpuc"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(diagnostics: Sequence[Diagnostic]) -> str:
    """`::error file=...,line=...,title=...::message` lines; GitHub shows them on the pull request's diff."""
    lines = []
    for d in diagnostics:
        props = [f"file={_prop(d.shown_file)}"]
        if d.line:
            props.append(f"line={d.line}")
        props.append(f"title={_prop('gpuc ' + (d.code or d.path))}")
        body = f"{d.path}: {d.message}" + (f"\nhint: {d.hint}" if d.hint else "")
        level = {"error": "error", "note": "notice"}.get(d.severity, "warning")
        lines.append(f"::{level} {','.join(props)}::{_data(body)}")
    return "".join(line + "\n" for line in lines)


# What each kind of finding is (Diagnostic.rule), for code scanning's list of rules; `rules/<name>` are the input rules
# (compiler/validate/rules/<name>.py), `output/<name>` the checks of the compiled output (compiler/check/).
RULE_TEXT = {
    "files": "a fleet file or directory gpuc cannot read",
    "schema": "a document that does not match the schema of its kind",
    "secrets": "a value that looks like a credential, in an intent",
    "names": "a name defined twice in the fleet",
    "cluster": "a Cluster that does not resolve against gpuc's platform facts",
    "sizing": "a workload gpuc cannot size or match to a node pool",
    "placement": "pods that cannot be placed on the cluster's devices",
    "cost": "what an intent change costs per cluster (gpuc diff)",
}


def rule_id(d: Diagnostic) -> str:
    """A warning a cluster can acknowledge is its own rule (its code); other findings are grouped by what found them."""
    return d.code or (f"{GENERIC_RULE}/{d.rule}" if d.rule else GENERIC_RULE)


def _rule_text(rule: str) -> str:
    kind = rule.removeprefix(f"{GENERIC_RULE}/")
    if rule == GENERIC_RULE:
        return "gpuc finding"
    if kind.startswith("rules/"):
        return f"input rule: {kind.removeprefix('rules/').replace('-', ' ')}"
    if kind.startswith("output/"):
        return f"output check: {kind.removeprefix('output/').replace('-', ' ')}"
    return RULE_TEXT.get(kind, f"warning {kind} (a cluster's spec.acknowledge accepts it)")


def sarif(diagnostics: Sequence[Diagnostic], version: str) -> str:
    """One SARIF run; each kind of finding (rule_id) is a rule."""
    rules = sorted({rule_id(d) for d in diagnostics})
    results = []
    for d in diagnostics:
        location: dict = {"physicalLocation": {"artifactLocation": {"uri": d.shown_file}}}
        if d.line:
            location["physicalLocation"]["region"] = {"startLine": d.line}
        text = f"{d.path}: {d.message}" + (f" Fix: {d.hint}" if d.hint else "")
        results.append({"ruleId": rule_id(d), "ruleIndex": rules.index(rule_id(d)),
                        "level": {"error": "error", "note": "note"}.get(d.severity, "warning"),
                        "message": {"text": text}, "locations": [location]})
    run = {"tool": {"driver": {"name": "gpuc", "version": version,
                               "rules": [{"id": r, "shortDescription": {"text": _rule_text(r)}} for r in rules]}},
           "results": results}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"
