"""`gpuc catalog --matrix`: which Kubernetes minors, DRA driver lines and operator releases gpuc compiles
together, found by compiling them (docs/reference/platform-matrix.md). Each combination is a one-cluster case
of one fleet, compiled by the same pipeline as `gpuc validate`, so the page says what gpuc does, not what a
second copy of its rules would say; a test regenerates it and compares.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import yaml

from .diagnostics import Diagnostic, InputError
from .emit.platform_matrix import Case, Verdict
from .facts import load_table
from .facts.driver import driver_lines
from .facts.platform import gpu_operator, nim_operator

NIM_DRIVER = "25.12.0"  # a driver every minor takes, so the NIM table shows the NIM Operator's own pairing
POOL = {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}


def cases() -> list[Case]:
    """The combinations the page shows: every minor with every driver line (its newest release) under the
    newest GPU Operator; every GPU Operator release in each mode gpuc installs; every NIM Operator line with
    every minor."""
    minors = list(load_table("kubernetes")["resourceApi"])
    lines = sorted(driver_lines().values(), key=lambda line: line.order)
    operators = list(gpu_operator()["releases"])
    out = [Case("driver", minor, line.releases[-1], operators[-1], "helm") for minor in minors for line in lines]
    out += [Case("operator", "1.36", lines[-1].releases[-1], release, mode) for release in operators for mode in ("helm", "gpuCluster")]
    nims = [line["since"] for line in nim_operator()["draLines"]]
    out += [Case("nim", minor, NIM_DRIVER, operators[-1], "helm", nim) for nim in nims for minor in minors]
    return out


def judge(cases: list[Case]) -> dict[Case, Verdict]:
    """Compile every case as a cluster of one fleet (cases refused at input are taken out and the rest
    compiled again, since input errors stop a fleet before its output checks)."""
    from .pipeline import CompileOptions, compile_fleet

    names = {case: f"m{i}" for i, case in enumerate(cases)}
    verdicts: dict[Case, Verdict] = {}
    left = list(cases)
    with tempfile.TemporaryDirectory(prefix="gpuc-matrix-") as tmp:
        while left:
            root = _write(Path(tmp) / f"fleet{len(verdicts)}", {names[c]: c for c in left})
            try:
                compiled = compile_fleet(root, CompileOptions(keep=False, jobs=1))
            except InputError as exc:
                refused = _by_case(left, names, [d for d in exc.diagnostics if d.severity == "error"])
                warned = _by_case(left, names, [d for d in exc.diagnostics if d.severity != "error"])
                if not refused:
                    raise
                for case in refused:
                    verdicts[case] = Verdict(errors=tuple(refused[case]), warnings=tuple(warned.get(case, ())))
                left = [c for c in left if c not in verdicts]
                continue
            warned = _by_case(left, names, compiled.warnings)
            for case in left:
                outcome = compiled.clusters[names[case]]
                verdicts[case] = Verdict(errors=tuple(_text(d, case) for d in outcome.rejected + outcome.infeasible),
                                         warnings=tuple(warned.get(case, ())))
            left = []
    return {case: verdicts[case] for case in cases}


def _write(root: Path, cases: dict[str, Case]) -> Path:
    (root / "clusters").mkdir(parents=True)
    (root / "workloads").mkdir()
    for name, case in cases.items():
        spec: dict = {"kubernetesVersion": case.kubernetes, "draDriver": {"version": case.driver, "nvidiaDriverRoot": "/"},
                      "gpuOperator": {"mode": case.mode, "version": case.operator}, "nodePools": [POOL]}
        if case.nim:
            spec["nimOperator"] = {"version": case.nim}
            workload = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": "llama", "namespace": f"nim-{name}"},
                        "spec": {"clusters": [name], "model": {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3",
                                                               "parameters": "8B"},
                                 "gpu": {"count": 1}, "secrets": {"ngcApiKey": "ngc-api-secret", "imagePull": "ngc-secret"}}}
            (root / "workloads" / f"{name}.yaml").write_text(yaml.safe_dump(workload, sort_keys=False))
        doc = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": name}, "spec": spec}
        (root / "clusters" / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def _by_case(cases: list[Case], names: dict[Case, str], diagnostics: list[Diagnostic]) -> dict[Case, list[str]]:
    """Each finding's text by the case whose file it names (a workload file is named after its cluster)."""
    by_name = {names[case]: case for case in cases}
    out: dict[Case, list[str]] = {}
    for d in diagnostics:
        match = re.search(r"(?:clusters|workloads)/(m\d+)\.yaml$", d.file.replace("\\", "/"))
        if match and match.group(1) in by_name:
            case = by_name[match.group(1)]
            out.setdefault(case, []).append(_text(d, case))
    return out


def _text(d: Diagnostic, case: Case) -> str:
    """The finding without the case's own names and versions, so one reason reads the same in every cell it explains."""
    text = f"{d.path}: {d.message}" + (f" [{d.code}]" if d.code else "")
    text = re.sub(r"\bm\d+\b", "<cluster>", text)
    text = re.sub(rf"(?<![\w.]){re.escape(case.operator)}(?![\w.])", "<its version>", text)
    return re.sub(rf"Kubernetes {re.escape(case.kubernetes)}(?![\d])", "Kubernetes <its minor>", text)
