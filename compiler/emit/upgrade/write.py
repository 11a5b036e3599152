"""Writing the plans: DIR/<cluster>/plan.md, plan.json, and step-N/transition.yaml with step-N/rendered/ (the cluster's
tree at that step), staged beside the previous plan and swapped in whole (emit.staging), so a failed write leaves the
previous plan as it was. A directory that is not a plan gpuc wrote is never replaced."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ...diagnostics import Diagnostic, InputError
from ..staging import Busy, StagingError, lock_tree, make_dirs, stage_cluster, stage_tree, swap_in
from .model import ClusterPlan
from .report import as_json, cluster_markdown, transition_block

MARK = "gpuc upgrade"  # plan.json's "generatedBy": what makes a directory one gpuc may replace


def plan_files(plan: ClusterPlan, fleet: str, cluster_file: str, base: str, commit: str) -> dict[str, str]:
    files = {"plan.md": cluster_markdown(plan, fleet, cluster_file),
             "plan.json": json.dumps({"generatedBy": MARK, **json.loads(as_json([plan], base, commit))}, indent=2) + "\n"}
    for step in plan.steps:
        files[f"step-{step.number}/transition.yaml"] = transition_block(step)
        files.update({f"step-{step.number}/rendered/{rel}": text for rel, text in step.files.items()})
    return files


def _ours(directory: Path) -> bool:
    try:
        return json.loads((directory / "plan.json").read_text(encoding="utf-8")).get("generatedBy") == MARK
    except (OSError, ValueError, AttributeError):
        return False


def write_plans(out: Path, plans: list[ClusterPlan], fleet: str, cluster_files: dict[str, str], base: str, commit: str) -> None:
    foreign = [out / p.cluster for p in plans if (out / p.cluster).exists() and not _ours(out / p.cluster)]
    if foreign:
        raise InputError([Diagnostic(str(d), 0, "-o", "this directory is not a plan gpuc upgrade wrote, and writing the plan replaces it "
                                     "whole", "write the plan to another directory (-o)") for d in foreign])
    try:
        created = make_dirs(out)
    except OSError as exc:
        raise InputError([Diagnostic(str(out), 0, "-o", f"cannot create the directory: {exc.strerror or exc}",
                                     "check the path and its permissions")]) from None
    try:
        lock = lock_tree(out)
    except Busy:
        raise InputError([Diagnostic(str(out), 0, "-o", "another gpuc is writing to this directory", "wait for it, or use another -o")]) from None
    try:
        staging = stage_tree(out)
        try:
            for plan in plans:
                stage_cluster(out, staging, plan.cluster, plan_files(plan, fleet, cluster_files.get(plan.cluster, ""), base, commit), set())
            swap_in(out, staging, [p.cluster for p in plans], prune_other_clusters=False)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except (OSError, StagingError) as exc:
        for d in reversed(created):
            shutil.rmtree(d, ignore_errors=True)
        raise InputError([Diagnostic(str(out), 0, "-o", f"cannot write the plan: {getattr(exc, 'strerror', None) or exc}; the previous plan is unchanged",
                                     "check the directory's permissions and free space")]) from None
    finally:
        os.close(lock)
