"""Shared test helpers: build small fleets in a temp directory and run the CLI in-process."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "intents"
GOLDEN = REPO / "tests" / "golden"
# shared/ (the upstream reference files and sources) sits beside the checkout (CI, the main clone); a git worktree
# nests one level deeper. GPUC_SHARED names it for a checkout elsewhere (a clone under /tmp, another user's home).
SHARED = (Path(os.environ["GPUC_SHARED"]) if os.environ.get("GPUC_SHARED") else
          next((p / "shared" for p in REPO.parents if (p / "shared" / "reference").is_dir()), REPO.parent / "shared"))
REFERENCE = SHARED / "reference"


@pytest.fixture(scope="session", autouse=True)
def _no_user_build_cache(tmp_path_factory):
    """Module-scoped fixtures render too, before any test's own cache is set: theirs is one for the session, never
    the user's ~/.cache (which need not exist, nor be writable)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUC_CACHE_DIR", str(tmp_path_factory.mktemp("gpuc-session-cache")))
        yield


@pytest.fixture(autouse=True)
def _own_build_cache(tmp_path_factory, monkeypatch):
    """Every test renders with a cache of its own: none reads another's, and none writes the user's ~/.cache."""
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path_factory.mktemp("gpuc-cache")))


@pytest.fixture(autouse=True)
def _fleet_relative_paths_reset():
    """The CLI shows paths from the fleet it was given (a process-wide setting): no test sees another's."""
    yield
    from compiler.diagnostics import show_paths_from

    show_paths_from(None)


@dataclass
class Result:
    code: int
    out: str
    err: str


def gpuc(*args: str) -> Result:
    """Run the CLI in-process; returns exit code and captured output."""
    from compiler.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


def cluster_doc(name: str = "c1", kubernetes: str = "1.34", driver: str = "25.12.0", pools: list | None = None,
                **spec: Any) -> dict:
    doc = {
        "apiVersion": "gpuc.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {
            "kubernetesVersion": kubernetes,
            "draDriver": {"version": driver, "nvidiaDriverRoot": "/run/nvidia/driver"},
            "gpuOperator": {"mode": "helm", "version": "v25.10.1"},
            "nimOperator": {"version": "3.1.2"},
            "nodePools": pools if pools is not None else [
                {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
            ],
            "gitops": {"repoURL": "https://git.example.com/fleet.git", "path": f"rendered/{name}",
                       "destination": {"name": name}},
        },
    }
    deep_update(doc["spec"], spec)
    if "acknowledge" not in spec and kubernetes in ("1.32", "1.33"):
        # tests of the v1beta1/v1beta2 shapes: the cluster has DRA and its beta API on (test_real_cluster.py tests
        # the warning), and the 25.3/25.8 charts, which pick their DeviceClasses' API version from Helm's
        # capabilities, are right only under a Helm older than 3.19 (test_real_cluster.py tests the refusal)
        doc["spec"]["acknowledge"] = [{"warning": "dra-beta", "reason": "the test cluster turns DRA on"}]
        if driver.split(".")[:2] in (["25", "3"], ["25", "8"]):
            doc["spec"]["acknowledge"].append({"warning": "helm-capabilities", "reason": "the test's Helm is older than 3.19"})
    op = doc["spec"]["gpuOperator"]
    if ("acknowledge" not in spec and op.get("mode") in ("helm", "patch")
            and doc["spec"]["draDriver"].get("nvidiaDriverRoot") == "/run/nvidia/driver"):
        # the operator's GPU driver beside a ClusterPolicy: test_real_cluster.py tests the warning
        doc["spec"].setdefault("acknowledge", []).append(
            {"warning": "driver-upgrade", "reason": "the test's nodes are drained before driver upgrades"})
    if doc["spec"]["draDriver"].get("fabric") == "topologyConfig":
        doc["spec"]["draDriver"].setdefault("values", {}).setdefault("image", dict(FORK_IMAGE))
    return doc


# The fork's build a cluster with fabric topologyConfig names (the upstream image refuses its gate).
FORK_IMAGE = {"repository": "registry.example.com/dra-fm", "tag": "v25.8.1-fm"}


# tests/fixtures/resourceslices-v1.yaml is a hand-written `kubectl get resourceslices -o yaml` export of a small
# real cluster; this is the Cluster intent that describes it.
SLICES_FIXTURE = Path(__file__).parent / "fixtures" / "resourceslices-v1.yaml"
SLICES_FIXTURE_POOLS = [
    {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 4}, "nodeNames": ["ip-10-0-1-17", "ip-10-0-1-18"]},
    {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 1}, "mig": {"layout": "all-balanced"},
     "nodeNames": ["ip-10-0-2-40"]},
]


# An HGX H100 pool whose NVSwitch fabric offers Fabric Manager partitions (draDriver.fabric partitionAttributes or
# topologyConfig; without those, nvlink.partitions mean nothing).
PARTITIONED_H100 = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "nvlink": {"partitions": [2, 4, 8]}}


def workload_doc(name: str = "w1", namespace: str = "team", **spec: Any) -> dict:
    return {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def nim_model(parameters: str = "8B", **extra: Any) -> dict:
    return {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3", "parameters": parameters, **extra}


NIM_SECRETS = {"ngcApiKey": "ngc-api-secret", "imagePull": "ngc-secret"}


def deep_update(target: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_update(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def write_fleet(root: Path, clusters: list[dict] | None = None, workloads: dict[str, list[dict] | str] | None = None) -> Path:
    """clusters: Cluster docs (one file each); workloads: relative path -> docs (or raw text)."""
    (root / "clusters").mkdir(parents=True, exist_ok=True)
    (root / "workloads").mkdir(parents=True, exist_ok=True)
    for doc in clusters if clusters is not None else [cluster_doc()]:
        (root / "clusters" / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    for rel, docs in (workloads or {}).items():
        path = root / "workloads" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(docs if isinstance(docs, str) else yaml.safe_dump_all(docs, sort_keys=False))
    return root


@pytest.fixture
def fleet(tmp_path: Path):
    """Factory: fleet(clusters=[...], workloads={...}) -> path of a fleet directory."""
    counter = iter(range(1000))

    def make(clusters: list[dict] | None = None, workloads: dict | None = None) -> Path:
        return write_fleet(tmp_path / f"fleet{next(counter)}", clusters, workloads)

    return make


def writable_copy(src: Path, dest: Path) -> Path:
    """A copy of a tree from shared/ that the test may change. shared/ is read-only (its files r--r--r--, its
    folders r-x): a plain copytree keeps those modes, which root does not notice and any other user does."""
    shutil.copytree(src, dest, copy_function=shutil.copyfile)
    for folder in [dest, *(p for p in dest.rglob("*") if p.is_dir() and not p.is_symlink())]:
        folder.chmod(folder.stat().st_mode | stat.S_IWUSR)
    return dest


def compile_single(fleet_path: Path, cluster: str = "c1"):
    from compiler.pipeline import compile_fleet

    return compile_fleet(fleet_path).compiled[cluster]


def objects_of(compiled, kind: str) -> list[dict]:
    return [o.manifest for o in compiled.objects if o.kind == kind]
