"""An input file or folder the user running gpuc cannot read: every command that reads the fleet names it first,
exit 2, nothing written, and the cache (which reads the same files to plan) says nothing about it.

The kernel itself refuses the reads: gpuc runs in a child process, and when the tests run as root (which
permission bits do not stop) the child loses CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH first, so root is held to
the bits like anyone else. A check before the cases proves the child really cannot read the file. The child
imports the compiler once and forks a fresh process for each command (a `python -m compiler` run without the
second of imports each)."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import EXAMPLES, REPO, SLICES_FIXTURE, gpuc

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


# Run in the child: each command of argv[1] (a JSON list of argument lists) in a process forked from one that has
# imported the compiler, its exit code and the bytes it wrote to file descriptors 1 and 2 (git's included) as
# `python -m compiler` would have, and whether it left an `out` directory; the JSON list of those to argv[2].
FORKED = """
import importlib, json, os, sys, tempfile, traceback
for name in ("compiler.cli", "compiler.pipeline", "compiler.incremental", "compiler.place", "compiler.load.state"):
    importlib.import_module(name)
from compiler.cli import main
results = []
for args in json.loads(sys.argv[1]):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            try:
                code = main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        results.append({"code": os.waitstatus_to_exitcode(status), "out": out.read().decode(), "err": err.read().decode(),
                        "wrote": os.path.exists("out")})
with open(sys.argv[2], "w") as f:
    json.dump(results, f)
"""


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    wrote: bool  # an `out` directory was there when the command ended


def gpuc_held(*commands: list[str], cwd: Path) -> list[Ran]:
    """gpuc's commands, one after another, each in a fresh process held to the permission bits, from `cwd`."""
    results = cwd.parent / f"{cwd.name}-results.json"
    done = child("-c", FORKED, json.dumps(commands), results, cwd=cwd)
    assert done.returncode == 0 and results.is_file(), done.stderr
    ran = [Ran(r["code"], r["out"], r["err"], r["wrote"]) for r in json.loads(results.read_text())]
    assert len(ran) == len(commands), ran
    return ran


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
def test_an_unreadable_input_is_named_first_by_every_command_that_reads_the_fleet(fleet, tmp_path, monkeypatch, what, first):
    monkeypatch.chdir(tmp_path)
    warm = gpuc("render", "fleet", "-o", "warm")  # a cache that knows the fleet (read before the file is locked)
    assert warm.code == 0, warm.err
    unreadable(fleet / what, tmp_path)
    *ran, as_json = gpuc_held(*COMMANDS.values(), [*COMMANDS["render"], "--output", "json"], cwd=tmp_path)
    for name, result in zip(COMMANDS, ran):
        assert result.returncode == 2, f"{name}: {result.returncode}\n{result.stderr}"
        assert result.stderr.splitlines()[:2] == [first, "    hint: give the user running gpuc read access to it, or move "
                                                  + ("it" if what == UNREADABLE else "what it holds") + " out of the fleet"], \
            f"{name}:\n{result.stderr}"
        assert "note:" not in result.stderr and "Traceback" not in result.stderr, f"{name}:\n{result.stderr}"
        assert not result.wrote, f"{name} wrote an output directory"
    assert as_json.returncode == 2 and as_json.stderr == "" and not as_json.wrote, as_json.stderr
    assert json.loads(as_json.stdout)["diagnostics"][0]["file"] == first.split(":")[0]


def test_a_cache_note_comes_after_the_error_it_did_not_cause(fleet, tmp_path, monkeypatch):
    """A cache that cannot be trusted is worth a note, but the input the render failed on is what the reader
    needs first."""
    monkeypatch.chdir(tmp_path)
    assert gpuc("render", "fleet", "-o", "warm").code == 0
    cache = Path(os.environ["GPUC_CACHE_DIR"])
    indexes = list(cache.rglob("index-*.json"))
    assert indexes, f"the warm render left no cache index under {cache}: this test would prove nothing"
    for index in indexes:
        index.write_text("{not json")
    unreadable(fleet / UNREADABLE, tmp_path)
    (result,) = gpuc_held(COMMANDS["render"], cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and lines[0].startswith(f"fleet/{UNREADABLE}: error:"), result.stderr
    assert lines[2] == "gpuc: 1 error(s); nothing was written", result.stderr
    assert lines[3].startswith("gpuc: note: cache index") and "ignored" in lines[3], result.stderr
    assert not result.wrote and not (tmp_path / "out").exists()
