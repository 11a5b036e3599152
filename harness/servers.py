"""One API server per Kubernetes minor a test asks for, started on first use and shared after.

Which binary serves a minor: its own release when versions.env builds one, else the newest release
emulating that minor (--emulated-version), which kube-apiserver supports for the three minors before
its own (KEP-4330 compatibility versions).
"""

from __future__ import annotations

from pathlib import Path

from . import components, controlplane
from .components import Release
from .controlplane import ControlPlane

EMULATION_WINDOW = 3  # minors below the binary's own that --emulated-version accepts


def server_for(minor: str) -> tuple[Release, str | None]:
    """(release to run, minor to emulate or None) for a cluster of Kubernetes `minor`."""
    for release in components.apiserver_releases():
        if release.minor == minor:
            return release, None
    newest = components.newest()
    lowest = int(newest.minor.split(".")[1]) - EMULATION_WINDOW
    if int(minor.split(".")[1]) < lowest:
        built = ", ".join(r.minor for r in components.apiserver_releases())
        raise components.ComponentMissing(
            f"no API server for Kubernetes {minor}: versions.env builds {built}, and {newest.minor} emulates only down to 1.{lowest}")
    return newest, minor


class ControlPlanes:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: dict[tuple[str, str | None, bool], ControlPlane] = {}

    def get(self, minor: str, *, scheduler: bool = False) -> ControlPlane:
        """A running control plane that behaves as Kubernetes `minor` (with a scheduler and the claim
        controller when asked: those get a server of their own, so tests that bind pods share no nodes)."""
        release, emulated = server_for(minor)
        key = (release.version, emulated, scheduler)
        if key not in self.running:
            workdir = self.root / f"{release.version}-{emulated or 'native'}{'-scheduler' if scheduler else ''}"
            self.running[key] = controlplane.start(release, workdir, emulated_minor=emulated, scheduler=scheduler, controllers=scheduler)
        return self.running[key]

    def stop(self) -> None:
        for cp in self.running.values():
            cp.stop()
        self.running.clear()
