"""`gpuc status` as text (a line per finding, its fix below) and as JSON."""

from __future__ import annotations

import json

from ..check.status import LEVELS, StatusReport

MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}


def status_text(report: StatusReport) -> str:
    lines = [f"cluster {report.cluster}: the running cluster from {report.source}"]
    width = max((len(f.check) for f in report.findings), default=0)
    for f in report.findings:
        lines.append(f"  {MARK[f.level]}  {f.check.ljust(width)}  {f.message}")
        if f.where:
            lines.append(f"        {' ' * width}  at {f.where}")
        if f.fix and f.level in ("warn", "fail", "skip"):
            lines.append(f"        {' ' * width}  fix: {f.fix}")
    counts = ", ".join(f"{report.count(level)} {level}" for level in LEVELS if report.count(level))
    lines.append(f"  {counts or 'nothing to check'}")
    return "\n".join(lines) + "\n"


def status_json(reports: list[StatusReport]) -> str:
    return json.dumps({"clusters": [r.as_dict() for r in reports]}, indent=2, sort_keys=False) + "\n"
