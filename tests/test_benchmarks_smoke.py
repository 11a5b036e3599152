"""Every benchmark of benchmarks.run runs to the end at a tiny size and prints its figures.

A benchmark stops at the first gpuc process that exits non-zero (a generated fleet gpuc refuses, a changed
command line), so a change that breaks one fails here rather than on the day someone re-measures the README.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from benchmarks.run import BENCHMARKS, HEADER

from conftest import REPO

# the rows each benchmark must print (a prefix of the row's first cell)
ROWS = {
    "help": ["`gpuc --help` start-up"],
    "render": ["render 2 clusters x 1 workloads", "render 2 clusters x 10 workloads", "naive serial floor"],
    "render-scaling": ["render scaling 1x", "render scaling 4x", "render scaling 16x"],
    "incremental": ["render 2 x 10 workloads (a folder of files per cluster), cold", "`gpuc diff --base HEAD`",
                    "render 2 x 10 workloads (files of 50 workloads, each holding those of 5 clusters) after one"],
    "plan": ["plan 200 pods on 50 nodes"],
    "plan-scaling": ["plan scaling 1x", "plan scaling 16x"],
    "claim-limit": ["one claim at the 32-device limit"],
    "cel": ["CEL: 3 selectors", "CEL: 3 selectors"],
    "report": ["plan --html: 50 nodes", "report load in headless Chromium"],
}
# benchmarks that need the harness's built components: smoke-tested with the real tests (tests/real/test_real_benchmarks.py)
REAL = {"plan-vs-scheduler"}
FIGURE = re.compile(r"^\| (?P<name>[^|]+) \| (?P<wall>\d+\.\d\d) s \| \d+\.\d\d-\d+\.\d\d s \| (?:\d+\.\d\d s|-) \| (?:\d+ MiB|-) \|")


def test_every_benchmark_is_smoke_tested():
    assert set(ROWS) | REAL == set(BENCHMARKS) and not set(ROWS) & REAL


@pytest.mark.parametrize("name", list(ROWS))
def test_benchmark_runs_at_a_tiny_size_and_prints_its_figures(name, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", "--only", name, "--scale", "0.01", "--clusters", "2", "--repeat", "1",
                           "--work", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert HEADER in done.stdout
    rows = [m["name"] for m in map(FIGURE.match, done.stdout.splitlines()) if m]
    for prefix in ROWS[name]:
        assert any(row.startswith(prefix) for row in rows), (prefix, done.stdout)
    assert "not judged at this size" in done.stdout or name in ("render-scaling", "plan-scaling")
    if name == "incremental":  # its own table, a row per layout, with the warm render's ratio to cold
        assert re.search(r"^\| a folder of files per cluster \| [\d.]+ s wall, [\d.]+ s CPU \| .*\(\d+\.\d\dx\)", done.stdout, re.M)
    assert not list(tmp_path.glob("*.aside-*")), "output trees set aside are deleted at the end"
