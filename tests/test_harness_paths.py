"""Where the harness puts and finds what the real-component tests need, wherever the checkout, the temporary
directory and the shared/ folder are. These run without the built components (tests/real uses them)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness import argocd, dra_driver

LONG = Path("/") / "/".join(["a-directory-name-of-forty-characters-xx"] * 4)  # 160 characters


def test_the_askpass_socket_fits_a_unix_socket_path_wherever_the_workdir_and_temp_dir_are(monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert argocd._ask_pass_socket(Path("/w/argocd")) == Path("/w/argocd/reposerver-ask-pass.sock")
    far = argocd._ask_pass_socket(LONG / "argocd")  # pytest-xdist's per-worker temp paths, a clone under a long path
    assert far.parent == Path("/tmp") and far.name.startswith("gpuc-argocd-")
    assert argocd._ask_pass_socket(LONG / "other") != far  # two repo servers never share one
    monkeypatch.setattr(tempfile, "tempdir", str(LONG))  # a TMPDIR too long to hold it: /tmp does
    assert argocd._ask_pass_socket(LONG / "argocd") == far
    for workdir in (Path("/w/argocd"), LONG / "argocd", LONG / "other"):
        assert len(str(argocd._ask_pass_socket(workdir)).encode()) <= 107


def test_the_upstream_sources_come_from_gpuc_upstream_src_then_gpuc_shared_then_beside_the_checkout(monkeypatch):
    monkeypatch.delenv("GPUC_UPSTREAM_SRC", raising=False)
    monkeypatch.delenv("GPUC_SHARED", raising=False)
    beside = dra_driver.upstream_dir()
    assert beside.parts[-3:] == ("shared", "upstream", "src")
    assert beside.parent.parent.parent in Path(dra_driver.__file__).resolve().parents
    monkeypatch.setenv("GPUC_SHARED", "/elsewhere/shared")
    assert dra_driver.upstream_dir() == Path("/elsewhere/shared/upstream/src")
    monkeypatch.setenv("GPUC_UPSTREAM_SRC", "/sources")
    assert dra_driver.upstream_dir() == Path("/sources")
