"""One API server per Kubernetes minor a test asks for, started on first use and shared after.

Which binary serves a minor: its own release when versions.env builds one, else the oldest release that
emulates it (--emulated-version), which kube-apiserver supports for the three minors before its own
(KEP-4330 compatibility versions; k8s.io/apiserver pkg/util/compatibility: floor = binary - 3).
"""

from __future__ import annotations

from pathlib import Path

from . import components, controlplane
from .components import Release
from .controlplane import ControlPlane

EMULATION_WINDOW = 3  # minors below the binary's own that --emulated-version accepts


def scheduling_plane(minor: str, workdir: Path) -> ControlPlane:
    """A control plane of its own with the scheduler and the claim controller, at the newest release that serves
    `minor`: what a caller creates there stays off the shared API servers."""
    release, emulated = server_for(minor, newest=True)
    return controlplane.start(release, workdir, emulated_minor=emulated, scheduler=True, controllers=True)


def server_for(minor: str, newest: bool = False) -> tuple[Release, str | None]:
    """(release to run, minor to emulate or None) for a cluster of Kubernetes `minor`: its own release if one is
    built, else the oldest built release whose emulation window holds it. With `newest`, the newest release that
    can serve it: the one binary then serves the minors after it too, as a control-plane upgrade needs
    (controlplane.restart on the same etcd). The scheduler and controllers run at the API server's release
    (harness/build.d/kubernetes.sh builds them at each), so a control plane never breaks the version skew policy."""
    releases = sorted(components.apiserver_releases(), key=lambda r: int(r.minor.split(".")[1]), reverse=newest)
    wanted = int(minor.split(".")[1])
    for release in releases:
        if release.minor == minor and not (newest and release != components.newest()):
            return release, None
    for release in releases:
        own = int(release.minor.split(".")[1])
        if own - EMULATION_WINDOW <= wanted <= own:
            return release, (minor if wanted < own else None)
    built = ", ".join(r.minor for r in releases)
    raise components.ComponentMissing(
        f"no API server serves Kubernetes {minor}: versions.env builds {built}, each serving its own minor and the {EMULATION_WINDOW} before it")


class ControlPlanes:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: dict[tuple[str, str | None, bool], ControlPlane] = {}

    def get(self, minor: str, *, scheduler: bool = False) -> ControlPlane:
        """A running control plane that behaves as Kubernetes `minor` (with a scheduler and the claim
        controller when asked: those get a server of their own, so tests that bind pods share no nodes)."""
        release, emulated = server_for(minor, newest=scheduler)
        key = (release.version, emulated, scheduler)
        if key not in self.running:
            workdir = self.root / f"{release.version}-{emulated or 'native'}{'-scheduler' if scheduler else ''}"
            self.running[key] = controlplane.start(release, workdir, emulated_minor=emulated, scheduler=scheduler, controllers=scheduler)
        return self.running[key]

    def stop(self) -> None:
        for cp in self.running.values():
            cp.stop()
        self.running.clear()
