"""The build budget check (tests/real/test_real_build_budget.py) on a cache made up here: it sums the latest
timing of each listed component and names what grew."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import components


def _cache(tmp_path: Path, timings: list[tuple[str, int]], listed: list[str]) -> None:
    log = tmp_path / "log"
    log.mkdir(parents=True)
    (log / "timings.tsv").write_text("".join(f"{n}\t10\t{cpu}\t100\n" for n, cpu in timings))
    (log / "components.txt").write_text("\n".join(listed) + "\n")


def test_the_latest_timing_of_each_listed_component_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUC_HARNESS_DIR", str(tmp_path))
    _cache(tmp_path, [("helm-v3.22.0", 900), ("helm-v3.22.0", 70), ("argocd-v3.2.11", 5000)], ["helm-v3.22.0"])
    report = components.build_cpu()
    assert report.total == 70 and report.verdict() is None


def test_over_budget_names_the_components_that_grew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUC_HARNESS_DIR", str(tmp_path))
    budget = int(components.pins()["BUILD_CPU_BUDGET_S"])
    _cache(tmp_path, [("helm-v3.22.0", 70), ("kube-apiserver-1.37.2", budget), ("newcomer-v1", 50)],
           ["helm-v3.22.0", "kube-apiserver-1.37.2", "newcomer-v1", "untimed-v2"])
    reference = tmp_path / "build-cpu.tsv"
    reference.write_text("# name\tCPU-s\nhelm-v3.22.0\t79\nkube-apiserver-1.37.2\t350\n")
    verdict = components.build_cpu(reference).verdict()
    assert verdict is not None
    assert f"kube-apiserver-1.37.2: {budget} CPU-s (reference 350)" in verdict and "newcomer-v1: 50 CPU-s (new)" in verdict and "untimed-v2" in verdict
    assert "helm-v3.22.0" not in verdict.split("grew")[1].split(";")[0]


def test_without_a_build_it_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUC_HARNESS_DIR", str(tmp_path))
    with pytest.raises(components.ComponentMissing, match="harness/build.sh"):
        components.build_cpu()
