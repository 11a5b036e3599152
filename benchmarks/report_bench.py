"""The capacity report's worst case: a 5,000-node pool where every node is held by its own workload,
and how long headless Chromium takes to load and paint the page (selenium drives Debian's chromium)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml


def worst_case_fleet(out: Path, nodes: int = 5000) -> Path:
    if out.exists():
        return out
    cluster = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": "big"}, "spec": {
        "kubernetesVersion": "1.34", "draDriver": {"version": "25.12.0", "nvidiaDriverRoot": "/run/nvidia/driver"},
        "gpuOperator": {"mode": "helm", "version": "v25.10.1"},
        "nodePools": [{"name": "h100", "nodes": nodes, "gpu": {"model": "H100-80GB", "count": 8}}],
        "gitops": {"repoURL": "https://git.example.com/fleet.git", "path": "rendered/big", "destination": {"name": "big"}},
        "acknowledge": [{"warning": "unchecked-crds", "reason": "benchmark fleet: no operator CRDs"},
                        {"warning": "driver-upgrade", "reason": "DRA nodes are drained before GPU driver upgrades"}]}}
    workloads = [{"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": f"w{i:04d}", "namespace": "team"},
                  "spec": {"replicas": 8, "gpu": {"count": 1}}} for i in range(nodes)]
    (out / "clusters").mkdir(parents=True)
    (out / "workloads").mkdir()
    (out / "clusters" / "big.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    (out / "workloads" / "w.yaml").write_text(yaml.safe_dump_all(workloads, sort_keys=False))
    return out


def chromium_available() -> bool:
    return not browser_missing()


def browser_missing() -> str:
    """What keeps the browser from starting, in one line ("" when nothing does)."""
    missing = [name for name in ("chromium", "chromedriver") if not shutil.which(name)]
    if not missing:
        return ""
    return (f"{' and '.join(missing)} not found on PATH: the capacity report is checked in a real browser; install "
            "Debian's chromium and chromium-driver (`apt-get install chromium chromium-driver`)")


@contextlib.contextmanager
def headless_chromium(profile: Path | None = None, console_log: bool = False) -> Iterator:
    """Debian's chromium under selenium, with the flags this machine's closed network needs. It writes only under
    its profile: its home there too (crash reports, dconf and NSS would otherwise go to the user's ~/.config,
    ~/.cache and ~/.pki, which need not exist nor be writable)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = profile or Path(tempfile.mkdtemp(prefix="gpuc-chromium-"))
    home = profile / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1300,2400"):
        options.add_argument(flag)
    if console_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver"), env=env), options=options)
    try:
        yield browser
    finally:
        browser.quit()


def browser_load_seconds(page: Path, repeat: int) -> list[float] | None:
    if not chromium_available():
        return None
    with headless_chromium() as browser:
        browser.get("about:blank")
        loads = []
        for _ in range(repeat):
            start = time.perf_counter()
            browser.get(page.as_uri())
            browser.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(done))")
            loads.append(time.perf_counter() - start)
            browser.get("about:blank")
        return loads
