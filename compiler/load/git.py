"""Read a fleet directory as it was at a git commit, without touching the working tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..diagnostics import Diagnostic, InputError


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise InputError([Diagnostic(str(cwd), 0, "--base", "git is not installed; `gpuc diff` reads the base from git")]) from None
    if done.returncode != 0:
        raise _GitError(done.stderr.decode(errors="replace").strip())
    return done.stdout


class _GitError(Exception):
    pass


def materialize(fleet_dir: Path, ref: str, dest: Path) -> tuple[bool, str]:
    """Write the fleet's files as of `ref` under `dest`: (whether the fleet directory existed there, the commit
    `ref` names, abbreviated as git shows it, so a report names the exact base even for a moving branch)."""
    fleet_dir = fleet_dir.resolve()
    probe = fleet_dir if fleet_dir.is_dir() else fleet_dir.parent
    try:
        top = Path(_git(probe, "rev-parse", "--show-toplevel").decode().strip())
    except _GitError:
        raise InputError([Diagnostic(str(fleet_dir), 0, "--base", "the fleet is not inside a git repository",
                                     "`gpuc diff` compares against a git commit; run it in the fleet's repository")]) from None
    try:
        commit = _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").decode().strip()
    except _GitError:
        raise InputError([Diagnostic(str(fleet_dir), 0, "--base", f"'{ref}' is not a commit of this repository",
                                     "pass a branch, tag or commit, e.g. --base origin/main")]) from None
    short = _git(top, "rev-parse", "--short", commit).decode().strip()
    rel = fleet_dir.relative_to(top).as_posix()
    try:  # the fleet may be the repository's root: git takes "." for that, never an empty pathspec
        listing = _git(top, "ls-tree", "-r", "-z", "--name-only", commit, "--", rel)
    except _GitError as exc:
        raise InputError([Diagnostic(str(fleet_dir), 0, "--base", f"git cannot list the fleet at '{ref}': {exc}")]) from None
    paths = [p for p in listing.decode().split("\0") if p]
    if not paths:
        return False, short
    try:
        batch = _git(top, "cat-file", "--batch", stdin="".join(f"{commit}:{p}\n" for p in paths).encode())
    except _GitError as exc:
        raise InputError([Diagnostic(str(fleet_dir), 0, "--base", f"git cannot read the fleet at '{ref}': {exc}")]) from None
    offset = 0
    for path in paths:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        body = batch[header_end + 1: header_end + 1 + size]
        offset = header_end + 1 + size + 1  # object content is followed by a newline
        target = dest / (Path(path).relative_to(rel) if rel != "." else Path(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    return True, short
