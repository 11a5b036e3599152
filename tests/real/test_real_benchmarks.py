"""The benchmark that needs the harness's built components runs to the end at a tiny size (the fast tier's
smoke run, tests/test_benchmarks_smoke.py, covers every other one)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from test_benchmarks_smoke import FIGURE

from conftest import REPO


def test_plan_vs_scheduler_runs_at_a_tiny_size_and_requires_the_same_placements(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", "--only", "plan-vs-scheduler", "--scale", "0.05", "--repeat", "1",
                           "--work", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [m["name"] for m in map(FIGURE.match, done.stdout.splitlines()) if m]
    for prefix in ("plan 50 pods on 10 nodes (the real-scheduler test's fleet)", "kube-scheduler binds the same plan in the harness",
                   "plan 1,000 pods on 250 nodes"):
        assert any(row.startswith(prefix) for row in rows), (prefix, done.stdout)
    assert re.search(r"^\| kube-scheduler binds the \d+ placed pods and leaves \d+ unschedulable, as gpuc says .*\| [\d.]+ bound \(wall\), "
                     r"[\d.]+ \(CPU\); [\d.]+ verdicts \(wall\) \|$", done.stdout, re.M), done.stdout
    assert re.search(r"^The same \d+ decisions .* takes [\d,.]+x less wall time than kube-scheduler", done.stdout, re.M), done.stdout
    assert "scheduler_perf's published DRA throughput at 500 nodes (the anchor) | - | 110-270 |" in done.stdout
