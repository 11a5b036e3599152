"""Property-based tests: generated valid fleets and mutated intents never crash the compiler, and
rendering is deterministic."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.diagnostics import InputError
from compiler.emit.tree import cluster_files
from compiler.facts.catalog import gpu_models
from compiler.pipeline import compile_fleet

from conftest import EXAMPLES, REPO, gpuc, write_fleet

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# (kubernetes, driver) pairs gpuc supports, oldest to newest
PLATFORMS = [("1.32", "25.3.2"), ("1.33", "25.8.1"), ("1.34", "25.12.0"), ("1.34", "0.4.1"), ("1.36", "0.5.1"), ("1.37", "0.5.1")]
MODELS = sorted(gpu_models())
MIG_MODELS = sorted(k for k, m in gpu_models().items() if m.mig)


@st.composite
def pools(draw) -> list[dict]:
    # pool 0 can always serve a full-GPU workload, so most generated fleets compile all the way
    out = [{"name": "base", "nodes": draw(st.integers(1, 4)), "gpu": {"model": draw(st.sampled_from(["H100-80GB", "A100-80GB", "B200-180GB"])), "count": 8},
            "nvlink": {"partitions": [2, 4, 8]}}]
    for i in range(draw(st.integers(0, 2))):
        mig = draw(st.booleans())
        model = draw(st.sampled_from(MIG_MODELS if mig else MODELS))
        pool: dict[str, Any] = {"name": f"pool-{i}", "nodes": draw(st.integers(1, 4)),
                                "gpu": {"model": model, "count": draw(st.sampled_from([1, 2, 4, 8]))}}
        if mig:
            profile = draw(st.sampled_from(sorted(gpu_models()[model].mig.profiles)))
            pool["mig"] = {"layout": draw(st.sampled_from(["all-balanced", f"all-{profile.replace('+', '.')}"]))}
        elif pool["gpu"]["count"] >= 2 and draw(st.booleans()):
            pool["nvlink"] = {"partitions": [s for s in (2, 4, 8) if s <= pool["gpu"]["count"]]}
        if draw(st.booleans()):
            pool["allocation"] = "devicePlugin"
        out.append(pool)
    return out


@st.composite
def fleets(draw) -> tuple[list[dict], list[dict]]:
    clusters = []
    for i in range(draw(st.integers(1, 2))):
        kubernetes, driver = draw(st.sampled_from(PLATFORMS))
        clusters.append({"apiVersion": "gpuc.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": f"c{i}"},
                         "spec": {"kubernetesVersion": kubernetes, "draDriver": {"version": driver},
                                  "gpuOperator": {"mode": draw(st.sampled_from(["helm", "patch", "none"])), "version": "v25.10.1"},
                                  "nodePools": draw(pools()),
                                  "gitops": {"repoURL": "https://git.example.com/f.git", "path": f"rendered/c{i}",
                                             "destination": {"name": f"c{i}"}}}})
    workloads = []
    for i in range(draw(st.integers(0, 5))):
        gpu: dict[str, Any] = {"count": draw(st.sampled_from([1, 1, 2, 4, 8]))}
        sharing = draw(st.sampled_from(["Exclusive", "Shared", "TimeSlicing", "MPS"]))
        gpu["sharing"] = sharing
        if sharing != "Exclusive" and draw(st.booleans()):
            gpu["shareGroup"] = f"g{i}"
        if draw(st.integers(0, 3)) == 0:
            gpu["require"] = {"architecture": [draw(st.sampled_from(["Hopper", "Ampere", "Blackwell", "Ada Lovelace"]))]}
        workloads.append({"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload",
                          "metadata": {"name": f"w{i}", "namespace": draw(st.sampled_from(["a", "b"]))},
                          "spec": {"replicas": draw(st.integers(0, 3)), "gpu": gpu}})
    return clusters, workloads


def _compile(root: Path):
    try:
        return compile_fleet(root)
    except InputError:  # bad or infeasible input is a finding, never a crash
        return None


@SETTINGS
@given(fleets())
def test_generated_fleets_compile_or_report_and_render_deterministically(fleet_spec):
    clusters, workloads = fleet_spec
    with tempfile.TemporaryDirectory() as tmp:
        root = write_fleet(Path(tmp) / "f", clusters, {"w.yaml": workloads} if workloads else {})
        first = _compile(root)
        if first is None:
            return
        again = compile_fleet(root)
        assert first.compiled.keys() == again.compiled.keys()
        for name, compiled in first.compiled.items():
            assert cluster_files(compiled) == cluster_files(again.compiled[name])


def _mutations() -> st.SearchStrategy:
    values = st.one_of(st.none(), st.booleans(), st.integers(-5, 100), st.text(max_size=12), st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
    return st.lists(st.tuples(st.sampled_from(["delete", "set", "add", "retype"]), st.integers(0, 10_000), values), min_size=1, max_size=4)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, path + (i,))
    return out


def _mutate(doc: Any, ops) -> Any:
    doc = copy.deepcopy(doc)
    for op, pick, value in ops:
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = paths[pick % len(paths)]
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        if op == "delete":
            del parent[key]
        elif op == "set":
            parent[key] = value
        elif op == "add" and isinstance(parent, dict):
            parent[f"extra{pick % 7}"] = value
        elif op == "retype":
            parent[key] = str(parent[key]) if not isinstance(parent[key], str) else [parent[key]]
    return doc


EXAMPLE_FILES = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.yaml"))


@SETTINGS
@given(st.sampled_from(EXAMPLE_FILES), st.integers(0, 5), _mutations())
def test_mutated_intents_never_crash(rel, doc_index, ops):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "f"
        shutil.copytree(EXAMPLES, root)
        docs = list(yaml.safe_load_all((EXAMPLES / rel).read_text()))
        docs[doc_index % len(docs)] = _mutate(docs[doc_index % len(docs)], ops)
        (root / rel).write_text(yaml.safe_dump_all(docs, sort_keys=False))
        _compile(root)


@pytest.fixture(scope="module")
def reference_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example fleet rendered once, in this process under its own hash seed: what every permuted render (each
    in a process of its own, under another seed) must equal."""
    reference = tmp_path_factory.mktemp("reference") / "ref"
    result = gpuc("render", EXAMPLES, "-o", reference)
    assert result.code == 0, result.err
    return reference


@settings(max_examples=8, deadline=None)
@given(st.permutations(EXAMPLE_FILES), st.integers(0, 2**32 - 1))
def test_render_ignores_file_names_order_and_hash_seed(reference_render, order, seed):
    """Files renamed so that they sort in another order, rendered under another hash seed: same bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "f"
        for i, rel in enumerate(order):
            target = root / Path(rel).parent / f"{i:02d}-{Path(rel).name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((EXAMPLES / rel).read_bytes())
        out = Path(tmp) / "out"
        env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(REPO))
        subprocess.run([sys.executable, "-m", "compiler", "render", str(root), "-o", str(out)], check=True, env=env, capture_output=True)
        reference = reference_render

        def tree(base: Path) -> dict[str, bytes]:
            return {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file()}

        a, b = tree(out), tree(reference)
        # provenance annotations name the (renamed) source file; everything else must be identical
        strip = lambda data: b"\n".join(l for l in data.split(b"\n") if b"gpuc.dev/source" not in l)
        assert sorted(a) == sorted(b)
        assert {k: strip(v) for k, v in a.items()} == {k: strip(v) for k, v in b.items()}
