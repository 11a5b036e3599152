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


def sarif(diagnostics: Sequence[Diagnostic], version: str) -> str:
    """One SARIF run; each code (or `gpuc` for findings without one) is a rule."""
    rules = sorted({d.code or GENERIC_RULE for d in diagnostics})
    results = []
    for d in diagnostics:
        location: dict = {"physicalLocation": {"artifactLocation": {"uri": d.shown_file}}}
        if d.line:
            location["physicalLocation"]["region"] = {"startLine": d.line}
        text = f"{d.path}: {d.message}" + (f" Fix: {d.hint}" if d.hint else "")
        results.append({"ruleId": d.code or GENERIC_RULE, "ruleIndex": rules.index(d.code or GENERIC_RULE),
                        "level": {"error": "error", "note": "note"}.get(d.severity, "warning"),
                        "message": {"text": text}, "locations": [location]})
    run = {"tool": {"driver": {"name": "gpuc", "version": version,
                               "rules": [{"id": r, "shortDescription": {"text": "gpuc finding" if r == GENERIC_RULE else r}}
                                         for r in rules]}},
           "results": results}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"
