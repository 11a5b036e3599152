"""Read a fleet directory as it was at a git commit, without touching the working tree."""

from __future__ import annotations

import os
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
        listing = _git(top, "ls-tree", "-r", "-z", "--full-tree", commit, "--", rel)
    except _GitError as exc:
        raise InputError([Diagnostic(str(fleet_dir), 0, "--base", f"git cannot list the fleet at '{ref}': {exc}")]) from None
    entries = _entries(listing, rel, ref, fleet_dir)
    if not entries:
        return False, short
    try:  # by object id: a path (which may hold a newline) never goes into the batch's line-based input
        batch = _git(top, "cat-file", "--batch", stdin="".join(f"{oid}\n" for _, oid, _ in entries).encode())
    except _GitError as exc:
        raise InputError([Diagnostic(str(fleet_dir), 0, "--base", f"git cannot read the fleet at '{ref}': {exc}")]) from None
    offset = 0
    root = dest.resolve() if dest.exists() else dest.parent.resolve() / dest.name
    checked: set[Path] = set()
    for mode, _, path in entries:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        body = batch[header_end + 1: header_end + 1 + size]
        offset = header_end + 1 + size + 1  # object content is followed by a newline
        target = dest.joinpath(*path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.parent not in checked:  # no directory on the way is a link out of dest (belt and braces)
            if not target.parent.resolve().is_relative_to(root):
                raise _hostile(fleet_dir, ref, "/".join(path), "leads out of the fleet")
            checked.add(target.parent)
        if mode == "120000":  # a symbolic link, as a checkout makes it: the loader refuses one that leaves the fleet
            try:
                os.symlink(body.decode("utf-8", "surrogateescape"), target)
            except (OSError, ValueError):
                raise _hostile(fleet_dir, ref, "/".join(path), "is a symbolic link gpuc cannot recreate") from None
        else:
            target.write_bytes(body)
    return True, short


def _entries(listing: bytes, rel: str, ref: str, fleet_dir: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """(mode, object id, path parts under the fleet) of each file at the base. Submodules (commits, not files)
    are left out as a checkout leaves them empty; a path no checkout would write (`..`, `.`, an empty or a
    `.git` segment) makes the base unreadable rather than a file written outside the temporary directory."""
    out = []
    prefix = () if rel == "." else tuple(rel.split("/"))
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        mode, kind, oid = meta.decode().split(" ")
        path = raw.decode("utf-8", "surrogateescape")
        if kind != "blob":
            continue
        parts = tuple(path.split("/"))
        if any(p in ("", ".", "..") or p.lower() == ".git" for p in parts) or parts[:len(prefix)] != prefix:
            raise _hostile(fleet_dir, ref, path, "is not a path a checkout would write")
        out.append((mode, oid, parts[len(prefix):]))
    return out


def _hostile(fleet_dir: Path, ref: str, path: str, what: str) -> InputError:
    return InputError([Diagnostic(str(fleet_dir), 0, "--base", f"the fleet at '{ref}' holds {path!r}, which {what}",
                                  "gpuc diff reads the base's files as a checkout would; fix the base commit, or compare against another")])
