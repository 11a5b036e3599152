"""The tests against real components: the upstream allocator, kube-apiserver, kube-scheduler.

Each is built by harness/build.sh (the README's test command runs it). A component that is missing
fails the test that needs it, with the command that builds it: these tests never skip.
Every test here carries the `real` mark: `pytest -m "not real"` is the fast tier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.allocref import Allocref
from harness.controlplane import ControlPlane
from harness.servers import ControlPlanes, scheduling_plane

from conftest import EXAMPLES, gpuc

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real)


@pytest.fixture(scope="session")
def allocref() -> Iterator[Allocref]:
    ref = Allocref()
    yield ref
    ref.close()


@pytest.fixture(scope="session")
def control_planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlanes]:
    planes = ControlPlanes(tmp_path_factory.mktemp("control-planes"))
    yield planes
    planes.stop()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example fleet rendered once per module (the operators' tests read its objects and values)."""
    out = tmp_path_factory.mktemp("rendered")
    result = gpuc("render", str(EXAMPLES), "-o", str(out))
    assert result.code == 0, result.err
    return out


@pytest.fixture
def fresh_plane(tmp_path: Path) -> Iterator[Callable[[str], ControlPlane]]:
    """Control planes of a test's own, with the scheduler and the claim controller (at the newest release,
    emulating the minor asked for): what a test creates stays off the session's shared API servers."""
    planes: list[ControlPlane] = []

    def start(minor: str) -> ControlPlane:
        cp = scheduling_plane(minor, tmp_path / f"cp-{minor}")
        planes.append(cp)
        return cp

    yield start
    for cp in planes:
        cp.stop()
