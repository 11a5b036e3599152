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


def newest() -> Release:
    return Release(pins()["KUBE_SCHEDULER_RELEASE"])


def binary(name: str) -> Path:
    """Path of a built component: kube-apiserver-1.37.2, kube-scheduler-1.37.2, etcd, allocref, ...

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
        stamp = (path.parent / f"{full}.stamp").read_text().strip() if (path.parent / f"{full}.stamp").is_file() else ""
        if stamp != own_sources_stamp():
            raise ComponentMissing(f"{full} in {path.parent} was built from other harness sources than this checkout's: run {build}")
    return path
