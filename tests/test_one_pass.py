"""One pass (issue 46): `validate`, `render` and `plan` report every finding the fleet has, in file order, not the first
stage's only; nothing a broken document alone causes; and nothing accepted in silence (a budget on a namespace no
workload uses, an entry of the fleet gpuc cannot read)."""

from __future__ import annotations

import os

import pytest

from conftest import gpuc

# ------------------------------------------------------------------------------------- entries gpuc cannot read

@pytest.mark.parametrize("make, why", [
    (lambda p: os.symlink("../missing.yaml", p / "gone.yaml"), "gone.yaml: error: (file): is a symbolic link to '../missing.yaml', which does not exist"),
    (lambda p: os.symlink("gone", p / "gone.yaml"), "gone.yaml: error: (file): is a symbolic link to 'gone', which does not exist"),
    (lambda p: os.symlink(p.parent / "elsewhere", p / "team"), "team: error: (file): is a symbolic link to the directory"),
    (lambda p: os.mkfifo(p / "pipe.yaml"), "pipe.yaml: error: (file): is not a regular file"),
], ids=["dangling", "loop", "directory-link", "fifo"])
def test_an_entry_gpuc_cannot_read_is_an_error_naming_it(fleet, tmp_path, monkeypatch, make, why):
    root = fleet()
    (root / "elsewhere").mkdir()
    make(root / "workloads")
    monkeypatch.chdir(root)
    for command in (["validate", "."], ["render", ".", "-o", tmp_path / "out"], ["render", ".", "-o", tmp_path / "out"]):
        result = gpuc(*command)  # the second render plans with the cache, which must not hide it either
        assert result.code == 2 and result.err.startswith(f"workloads/{why}"), result.err
