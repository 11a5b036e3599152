"""Run a diff: materialize the base from git, compile both sides leniently, compare."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...diagnostics import Diagnostic, InputError
from ...pipeline import Compilation, compile_fleet
from .compare import FleetDiff, compare
from .gitbase import materialize


def diff_fleet(fleet: Path, base_ref: str, only: str | None = None) -> FleetDiff:
    """Compile the fleet at `base_ref` (read from git) and as it is now, and compare the results."""
    head = compile_fleet(fleet, only, lenient=True)
    with tempfile.TemporaryDirectory(prefix="gpuc-base-") as tmp:
        base_dir = Path(tmp) / "fleet"
        base: Compilation | None = None
        if materialize(fleet, base_ref, base_dir):
            try:
                base = compile_fleet(base_dir, lenient=True)
            except InputError as exc:
                raise InputError([_at_base(d, base_ref) for d in exc.diagnostics]) from None
            if only is not None:
                base.clusters = {k: v for k, v in base.clusters.items() if k == only}
                base.infeasible = {k: v for k, v in base.infeasible.items() if k == only}
    return compare(base, head, base_ref)


def _at_base(d: Diagnostic, ref: str) -> Diagnostic:
    return Diagnostic(f"{ref}:{d.file}", d.line, d.path, f"(at the base) {d.message}", d.hint, d.severity)


