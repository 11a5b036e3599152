"""Run a diff: materialize the base from git, compile both sides leniently, compare."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...diagnostics import Diagnostic, InputError
from ...pipeline import Compilation, compile_fleet
from .compare import FleetDiff, compare
from .gitbase import materialize


def diff_fleet(fleet: Path, base_ref: str, only: str | None = None) -> FleetDiff:
    """Compile the fleet at `base_ref` (read from git) and as it is now, and compare the results.

    Bad input now is an error (exit 2); a base that does not compile is reported, so that a pull request
    fixing a broken base branch can still be reviewed."""
    head = compile_fleet(fleet, only, lenient=True, missing_ok=True)
    base, problems = _compile_base(fleet, base_ref, only)
    if only is not None and not problems and not (_has(head, only) or _has(base, only)):
        raise InputError([Diagnostic(str(fleet), 0, "--cluster", f"no cluster named '{only}' in the fleet, now or at {base_ref}",
                                     f"clusters: {', '.join(sorted(head.fleet.clusters)) or '(none)'}")])
    return compare(base, head, base_ref, problems)


def _compile_base(fleet: Path, ref: str, only: str | None) -> tuple[Compilation | None, list[Diagnostic]]:
    """The fleet at `ref`: None when it did not exist there; with its input errors when it does not compile."""
    with tempfile.TemporaryDirectory(prefix="gpuc-base-") as tmp:
        base_dir = Path(tmp) / "fleet"
        if not materialize(fleet, ref, base_dir):
            return None, []
        try:
            return compile_fleet(base_dir, only, lenient=True, missing_ok=True), []
        except InputError as exc:
            return None, [_at_base(d, ref) for d in exc.diagnostics]


def _has(compilation: Compilation | None, cluster: str) -> bool:
    return compilation is not None and cluster in compilation.fleet.clusters


def _at_base(d: Diagnostic, ref: str) -> Diagnostic:
    return Diagnostic(f"{ref}:{d.file}", d.line, d.path, f"(at the base) {d.message}", d.hint, d.severity)
