"""An input file or folder the user running gpuc cannot read: every command that reads the fleet names it first,
exit 2, nothing written, and the cache (which reads the same files to plan) says nothing about it.

The kernel itself refuses the reads: gpuc runs in a child process, and when the tests run as root (which
permission bits do not stop) the child loses CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH first, so root is held to
the bits like anyone else. A check before the cases proves the child really cannot read the file."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, REPO, SLICES_FIXTURE

PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2
UNREADABLE = "workloads/research/batch.yaml"


def _held_to_permission_bits() -> None:
    """In the child before exec: root's capabilities to ignore permission bits leave its bounding set, so the
    program exec'd has none of them (a non-root user never had them)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap}) failed: root cannot be held to permission bits here")


def child(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))  # this checkout's compiler; GPUC_CACHE_DIR is the test's own
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, preexec_fn=_held_to_permission_bits,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def fleet(tmp_path):
    fleet = shutil.copytree(EXAMPLES, tmp_path / "fleet")
    git = ["git", "-C", str(fleet), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)  # `gpuc diff` compares against it
    yield fleet
    for path in [fleet, *fleet.rglob("*")]:  # let pytest clean up
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def unreadable(path: Path, cwd: Path) -> None:
    path.chmod(0o000)
    probe = child("-c", f"open({str(path)!r}, 'rb') if {path.is_file()} else __import__('os').listdir({str(path)!r})", cwd=cwd)
    assert probe.returncode == 1 and "PermissionError" in probe.stderr, \
        f"the child can still read {path}: this test would prove nothing\n{probe.stderr}"


COMMANDS = {
    "render": ["render", "fleet", "-o", "out"],
    "render --no-cache": ["render", "fleet", "-o", "out", "--no-cache"],
    "validate": ["validate", "fleet"],
    "plan": ["plan", "fleet"],
    "plan --state": ["plan", "fleet", "--cluster", "lab", "--state", str(SLICES_FIXTURE)],
    "explain": ["explain", "fleet", "llama-70b"],
    "inventory": ["inventory", "fleet", "--cluster", "lab"],
    "diff": ["diff", "fleet", "--base", "HEAD"],
    "diff --no-cache": ["diff", "fleet", "--base", "HEAD", "--no-cache"],
    "status": ["status", "fleet", "--cluster", "lab", "--state", str(SLICES_FIXTURE)],
}


@pytest.mark.parametrize("what,first", [
    (UNREADABLE, f"fleet/{UNREADABLE}: error: (file): cannot read file: Permission denied"),
    ("workloads/research", "fleet/workloads/research: error: (directory): cannot read directory: Permission denied"),
])
def test_an_unreadable_input_is_named_first_by_every_command_that_reads_the_fleet(fleet, tmp_path, what, first):
    warm = child("-m", "compiler", "render", "fleet", "-o", "warm", cwd=tmp_path)  # a cache that knows the fleet
    assert warm.returncode == 0, warm.stderr
    unreadable(fleet / what, tmp_path)
    for name, args in COMMANDS.items():
        result = child("-m", "compiler", *args, cwd=tmp_path)
        assert result.returncode == 2, f"{name}: {result.returncode}\n{result.stderr}"
        assert result.stderr.splitlines()[:2] == [first, "    hint: give the user running gpuc read access to it, or move "
                                                  + ("it" if what == UNREADABLE else "what it holds") + " out of the fleet"], \
            f"{name}:\n{result.stderr}"
        assert "note:" not in result.stderr and "Traceback" not in result.stderr, f"{name}:\n{result.stderr}"
        assert not (tmp_path / "out").exists(), f"{name} wrote an output directory"
    as_json = child("-m", "compiler", *COMMANDS["render"], "--output", "json", cwd=tmp_path)
    assert as_json.returncode == 2 and as_json.stderr == "" and not (tmp_path / "out").exists(), as_json.stderr
    assert json.loads(as_json.stdout)["diagnostics"][0]["file"] == first.split(":")[0]


def test_a_cache_note_comes_after_the_error_it_did_not_cause(fleet, tmp_path):
    """A cache that cannot be trusted is worth a note, but the input the render failed on is what the reader
    needs first."""
    assert child("-m", "compiler", "render", "fleet", "-o", "warm", cwd=tmp_path).returncode == 0
    cache = Path(os.environ["GPUC_CACHE_DIR"])
    for index in cache.rglob("index-*.json"):
        index.write_text("{not json")
    unreadable(fleet / UNREADABLE, tmp_path)
    result = child("-m", "compiler", *COMMANDS["render"], cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and lines[0].startswith(f"fleet/{UNREADABLE}: error:"), result.stderr
    assert lines[2] == "gpuc: 1 error(s); nothing was written", result.stderr
    assert lines[3].startswith("gpuc: note: cache index") and "ignored" in lines[3], result.stderr
    assert not (tmp_path / "out").exists()
