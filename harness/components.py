"""Where the real components built by harness/build.sh are, at the versions harness/versions.env pins.

A test that needs a component asks `binary(...)`; a missing or stale build is a failure that says
how to build it, never a skip: a green run must mean the real component ran.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


class ComponentMissing(RuntimeError):
    """A real component the test needs has not been built (or was built from other sources)."""


@cache
def pins() -> dict[str, str]:
    """The KEY="value" lines of versions.env (the shell reads the same file)."""
    out: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        m = re.fullmatch(r'([A-Z][A-Z0-9_]*)="?([^"#]*?)"?\s*(#.*)?', line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def cache_dir() -> Path:
    """The same rule as build.sh: GPUC_HARNESS_DIR, else XDG_CACHE_HOME or ~/.cache, /gpuc-harness."""
    if os.environ.get("GPUC_HARNESS_DIR"):
        return Path(os.environ["GPUC_HARNESS_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuc-harness"


NESTED_MODULES = ("node",)  # folders of harness/ with a go.mod of their own (build.d/node.sh stamps harness/node)


def own_sources_stamp() -> str:
    """The stamp build.sh records for the harness's own Go programs (go.mod, go.sum, *.go in C order, less the files
    of the modules nested in harness/)."""
    h = hashlib.sha256()
    mine = (p for p in HERE.rglob("*.go") if p.relative_to(HERE).parts[0] not in NESTED_MODULES)
    files = [HERE / "go.mod", HERE / "go.sum"] + sorted(mine, key=lambda p: "./" + p.relative_to(HERE).as_posix())
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Release:
    """A Kubernetes release the harness builds an API server of."""

    version: str  # "1.37.2"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


def apiserver_releases() -> list[Release]:
    return [Release(v) for v in pins()["KUBE_APISERVER_RELEASES"].split()]


def controller_release(minor: str, apiserver: Release) -> Release:
    """The release of the scheduler and controllers beside an API server of `apiserver` serving `minor`: that minor's
    own where versions.env builds one (their clients read resource.k8s.io in their own minor's version, whatever
    they emulate), else the API server's."""
    own = [Release(v) for v in pins()["KUBE_CONTROLLER_RELEASES"].split() if Release(v).minor == minor]
    return own[0] if own else apiserver


def newest() -> Release:
    return Release(pins()["KUBE_SCHEDULER_RELEASE"])


def binary(name: str) -> Path:
    """Path of a built component: kube-apiserver-1.37.2, kube-scheduler-1.37.2, etcd, allocref,
    gpu-kubelet-plugin-main-9593204, fake-imex-3b2b865d, ...

    `etcd` and `allocref` take their pinned versions; they are rebuilt when harness/ sources change.
    """
    p = pins()
    versioned = {"etcd": f"etcd-{p['ETCD_VERSION']}", "allocref": f"allocref-{p['DRA_LIBRARY_VERSION']}"}
    full = versioned.get(name, name)
    path = cache_dir() / "bin" / full
    build = "harness/build.sh (the README's test command runs it; it reuses what is built)"
    if not path.is_file():
        raise ComponentMissing(f"{full} is not built in {path.parent}: run {build}")
    if name in versioned:
        stamp = (path.parent / f"{full}.stamp").read_text().split() if (path.parent / f"{full}.stamp").is_file() else []
        if stamp[:1] != [own_sources_stamp()]:  # the sources' stamp, then build.sh's hash of the build configuration
            raise ComponentMissing(f"{full} in {path.parent} was built from other harness sources than this checkout's: run {build}")
    return path


def mock_nvml_library(source: str | None = None) -> Path:
    """NVIDIA's mock libnvidia-ml.so.<version> built from k8s-test-infra `source` (default: versions.env's
    K8S_TEST_INFRA_SOURCE), in its folder bin/mock-nvml-<source>/ with the links libnvidia-ml.so.1 and
    libnvidia-ml.so that its Makefile makes (a driver root's lib folder holds the three)."""
    source = source or pins()["K8S_TEST_INFRA_SOURCE"]
    folder = cache_dir() / "bin" / f"mock-nvml-{source}"
    # (go build leaves the C header libnvidia-ml.so.<version>.h beside the library, the build its .stamp)
    found = sorted(p for p in folder.glob("libnvidia-ml.so.*.*") if re.fullmatch(r"libnvidia-ml\.so\.[0-9.]+", p.name))
    if not found:
        raise ComponentMissing(f"the mock NVML library of k8s-test-infra {source} is not built in {folder}: "
                               "run harness/build.sh (the README's test command runs it; it reuses what is built)")
    return found[-1]


@dataclass(frozen=True)
class BuildCpu:
    """Compiling every current component, from the build's own log: what tests/real/test_real_build_budget.py checks."""

    total: int  # CPU seconds, the latest log/timings.tsv entry of each component build.sh last listed
    budget: int  # versions.env BUILD_CPU_BUDGET_S
    grew: list[str]  # "name: N CPU-s (reference M)" for each above harness/build-cpu.tsv by more than 20 % + 10 s, or new
    untimed: list[str]  # components with no timings entry (built before build.sh logged them)

    def verdict(self) -> str | None:
        """None within budget, else the message naming what grew."""
        if self.total <= self.budget and not self.untimed:
            return None
        return (f"compiling the components takes {self.total} CPU-s, budget {self.budget} (harness/versions.env BUILD_CPU_BUDGET_S)"
                + (f"; grew against harness/build-cpu.tsv: {', '.join(self.grew)}" if self.grew else "")
                + (f"; no timings for {', '.join(self.untimed)} (rebuild them: harness/build.sh)" if self.untimed else ""))


def build_cpu(reference_file: Path = HERE / "build-cpu.tsv") -> BuildCpu:
    """Sum the latest timings of the components in log/components.txt (written by each harness/build.sh run)."""
    log = cache_dir() / "log"
    listed = log / "components.txt"
    if not listed.is_file():
        raise ComponentMissing(f"{listed} is missing: run harness/build.sh (it lists the components it builds)")
    latest: dict[str, int] = {}
    timings = log / "timings.tsv"
    for line in (timings.read_text().splitlines() if timings.is_file() else []):
        fields = line.split("\t")
        if len(fields) >= 3 and fields[2].isdigit():
            latest[fields[0]] = int(fields[2])
    reference: dict[str, int] = {}
    for line in reference_file.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and not line.startswith("#") and fields[1].isdigit():
            reference[fields[0]] = int(fields[1])
    names = listed.read_text().split()
    grew = [f"{n}: {latest[n]} CPU-s (reference {reference[n]})" if n in reference else f"{n}: {latest[n]} CPU-s (new)"
            for n in names if n in latest and (n not in reference or latest[n] > reference[n] * 1.2 + 10)]
    return BuildCpu(total=sum(latest.get(n, 0) for n in names), budget=int(pins()["BUILD_CPU_BUDGET_S"]), grew=grew,
                    untimed=[n for n in names if n not in latest])
