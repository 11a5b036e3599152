"""Large fleets parse in forked workers (compiler.runner): the documents, the findings and the
rendered tree must be exactly what a serial load gives."""

from __future__ import annotations

import os

import pytest

import compiler.load.fleet as fleet
import compiler.runner as parallel
import compiler.validate.documents as documents
from compiler.load.fleet import load_fleet, read_documents
from compiler.load.yaml_source import SourceDoc
from compiler.runner import parallel_reader, warm_caches

from conftest import EXAMPLES, GOLDEN, gpuc
from test_render import read_tree


def _snapshot(docs: list[SourceDoc]) -> list[tuple]:
    return [(d.file, d.index, d.value, d.start_line, d.text) for d in docs]


@pytest.fixture
def always_parallel(monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cores", lambda: 2)


def _load(root, **kwargs):
    files = load_fleet(root, **kwargs)
    return _snapshot(files.clusters), _snapshot(files.workloads), files.warnings


def test_parallel_load_gives_the_serial_documents(tmp_path, monkeypatch):
    serial = _load(EXAMPLES)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    readers = tmp_path / "readers"

    def read(path, display):  # records which process parsed each file
        with open(readers, "a") as fh:
            fh.write(f"{os.getpid()} {display}\n")
        return read_documents(path, display)

    monkeypatch.setattr(fleet, "read_documents", read)
    seen = []
    assert _load(EXAMPLES, meanwhile=lambda clusters: seen.append([d.file for d in clusters]), read_files=parallel_reader()) == serial
    assert seen == [[d[0] for d in serial[0]]]  # the parent ran `meanwhile` with the cluster documents, once
    workload_readers = {line.split()[0] for line in readers.read_text().splitlines() if " workloads/" in line}
    assert workload_readers and str(os.getpid()) not in workload_readers  # workers parsed the workload files


def test_small_fleets_parse_in_process():
    seen = []
    load_fleet(EXAMPLES, meanwhile=seen.append, read_files=parallel_reader())
    assert seen == []  # no workers, so nothing to overlap


def _broken_fleet(root):
    (root / "clusters").mkdir(parents=True)
    (root / "clusters" / "a.yaml").write_text((EXAMPLES / "clusters" / "lab.yaml").read_text())
    workloads = root / "workloads"
    workloads.mkdir()
    for i in range(6):
        (workloads / f"ok-{i}.yaml").write_text(f"apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata:\n  name: w{i}\n")
    (workloads / "tabs.yaml").write_text("a:\n\tb: 1\n")
    (workloads / "dup.yaml").write_text("kind: GpuWorkload\nkind: GpuWorkload\n")
    (workloads / "deep.yaml").write_text("x: " + "[" * 100 + "]" * 100 + "\n")
    return root


def test_worker_findings_equal_the_serial_ones(tmp_path, monkeypatch):
    root = _broken_fleet(tmp_path)
    with pytest.raises(Exception) as serial:
        load_fleet(root)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    with pytest.raises(Exception) as forked:
        load_fleet(root, read_files=parallel_reader())
    assert forked.type is serial.type
    assert forked.value.diagnostics == serial.value.diagnostics
    assert {d.file for d in forked.value.diagnostics} == {"workloads/tabs.yaml", "workloads/dup.yaml", "workloads/deep.yaml"}


def test_render_with_parallel_parsing_matches_the_golden_files(tmp_path, always_parallel):
    out = tmp_path / "out"
    assert gpuc("render", EXAMPLES, "-o", out).code == 0
    assert read_tree(out) == read_tree(GOLDEN)


@pytest.mark.parametrize("version", ["9.99", "v1.34.2", ["1.34"], None, "banana", 1.34, "1." + "3" * 300])
def test_cache_warming_never_fails_on_unvalidated_clusters(version):
    doc = SourceDoc("clusters/x.yaml", 0, {"kind": "Cluster", "spec": {"kubernetesVersion": version}})
    warm_caches([doc, SourceDoc("clusters/y.yaml", 0, ["not", "a", "map"])])  # validation reports these, not the warm-up


def _invalid_fleet(root):
    """Documents that fail on their own (kind, types, a credential) and together (a duplicate name)."""
    (root / "clusters").mkdir(parents=True)
    (root / "clusters" / "lab.yaml").write_text((EXAMPLES / "clusters" / "lab.yaml").read_text())
    workloads = root / "workloads"
    workloads.mkdir()
    head = "apiVersion: gpuc.dev/v1alpha1\n"
    (workloads / "a.yaml").write_text(head + "kind: GpuWorkload\nmetadata: {name: w, namespace: t}\nspec: {replicas: '2', gpu: {count: 1}}\n"
                                      "---\n" + head + "kind: GpuWorkLoad\nmetadata: {name: x, namespace: t}\nspec: {}\n")
    (workloads / "b.yaml").write_text(head + "kind: GpuWorkload\nmetadata: {name: ok, namespace: t}\nspec: {gpu: {count: 1}}\n"
                                      "---\n" + head + "kind: GpuWorkload\nmetadata: {name: ok, namespace: t}\nspec: {gpu: {count: 1}}\n")
    (workloads / "c.yaml").write_text(head + "kind: GpuWorkload\nmetadata: {name: s, namespace: t}\n"
                                      "spec: {gpu: {count: 1}, secrets: {ngcApiKey: nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdEFGH}}\n")
    return root


def test_documents_checked_while_parsing_report_what_a_serial_load_reports(tmp_path, monkeypatch):
    root = _invalid_fleet(tmp_path / "fleet")
    serial = gpuc("validate", root)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    checked_early = []
    real = documents.DocumentChecks.__call__
    monkeypatch.setattr(documents.DocumentChecks, "__call__", lambda self, doc: checked_early.append(doc.ref) or real(self, doc))
    read_along = gpuc("validate", root)
    assert len(checked_early) == 5  # every workload document was checked as it arrived
    assert serial.code == read_along.code == 2
    assert read_along.err == serial.err
    for expected in ("replicas", "GpuWorkLoad", "duplicate GpuWorkload 't/ok'", "looks like"):
        assert expected in serial.err, expected
    assert "nvapi-AbCd" not in serial.err


def test_one_job_parses_in_this_process(always_parallel):
    seen = []
    load_fleet(EXAMPLES, meanwhile=seen.append, read_files=parallel_reader(jobs=1))
    assert seen == []  # --jobs 1: no worker processes, so nothing ran alongside them


def test_build_takes_the_checks_made_while_parsing(monkeypatch, always_parallel):
    """The read-along exists to save build_fleet the work: its results must be used, not redone."""
    from compiler.diagnostics import Findings
    from compiler.runner import load

    loaded = load(EXAMPLES)
    assert loaded.checked_early is not None
    redone = []
    real = documents.check_document
    monkeypatch.setattr(documents, "check_document", lambda doc, *a: redone.append(doc.file) or real(doc, *a))
    fleet = documents.build_fleet(loaded.files, Findings(), loaded.checked_early)
    assert fleet.workloads and not [f for f in redone if f.startswith("workloads/")]
