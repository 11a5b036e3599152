"""The `gpuc upgrade` output the how-to pages show is what gpuc prints for that change of the example fleet.

Each page holds one output block, after a `<!-- gpuc upgrade output: NAME -->` line; the test makes the page's change
to a copy of intents/ committed in a git repository and compares. To bring the pages up to date after a deliberate
change of the output: `GPUC_REGENERATE_DOCS=1 pytest tests/test_upgrade_docs.py`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, gpuc

DOCS = Path(__file__).resolve().parents[1] / "docs" / "how-to"

# page -> (cluster, the edits the page tells the reader to make: file under intents/clusters, old text, new text)
SCENARIOS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "upgrade-dra-driver.md": ("prod-east", "prod-east.yaml", [('version: "25.12.0"', 'version: "0.5.1"')]),
    "device-plugin-to-dra.md": ("staging", "staging.yaml", [
        ("allocation: devicePlugin                   # not migrated yet: keeps the device plugin, DRA stays off it",
         "allocation: dra")]),
    "move-to-gpucluster.md": ("lab", "lab.yaml", [("mode: helm", "mode: gpuCluster"),
                                                  ("    namespace: dra-driver\n", "")]),
    "upgrade-kubernetes.md": ("prod-east", "prod-east.yaml", [('kubernetesVersion: "1.34"', 'kubernetesVersion: "1.35"')]),
}
# four backticks: the output holds fenced YAML of its own
MARK = re.compile(r"<!-- gpuc upgrade output: (?P<name>[\w.-]+) -->\n\n````console\n(?P<body>.*?)\n````\n", re.S)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo, check=True, capture_output=True)


def _output(tmp_path: Path, page: str) -> str:
    cluster, file, edits = SCENARIOS[page]
    repo = tmp_path / "fleet-repo"
    shutil.copytree(EXAMPLES, repo / "intents")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "what the clusters run")
    path = repo / "intents" / "clusters" / file
    text = path.read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"{page}: the edit {old!r} no longer applies to {file}"
        text = text.replace(old, new)
    path.write_text(text)
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        result = gpuc("upgrade", "intents", "--base", "main", "--cluster", cluster)
    finally:
        os.chdir(cwd)
    assert result.code == 0, result.err
    return f"$ gpuc upgrade intents --base main --cluster {cluster}\n{result.out.rstrip()}"


@pytest.mark.parametrize("page", SCENARIOS)
def test_the_page_shows_what_gpuc_upgrade_prints_for_its_change(tmp_path: Path, page: str) -> None:
    doc = DOCS / page
    text = doc.read_text()
    found = [m for m in MARK.finditer(text) if m.group("name") == page.removesuffix(".md")]
    assert len(found) == 1, f"{page}: no (or more than one) `<!-- gpuc upgrade output: {page.removesuffix('.md')} -->` block"
    expected = _output(tmp_path, page)
    if os.environ.get("GPUC_REGENERATE_DOCS"):
        doc.write_text(text[:found[0].start("body")] + expected + text[found[0].end("body"):])
        return
    assert found[0].group("body") == expected, f"{page} shows stale output: GPUC_REGENERATE_DOCS=1 pytest {Path(__file__).name}"
