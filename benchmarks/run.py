"""gpuc benchmarks: `python -m benchmarks.run [--repeat N] [--only NAME,...]`.

Every figure is the median wall-clock time of N runs of a fresh `python -m compiler ...` process
(a cold start: imports included), with the peak resident memory of that process. Fleets come from
benchmarks/fleetgen.py with a fixed seed, so every run measures the same input. Not part of the
test suite: timings belong in a benchmark, not in pass/fail tests.

Renders write tens of thousands of files, so their figures include the file system under --work:
`--work /dev/shm/gpuc-bench` (tmpfs) measures gpuc alone; the default temporary directory measures
gpuc plus that disk.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .fleetgen import generate, generate_plan

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Measurement:
    name: str
    seconds: float  # median
    runs: list[float]
    peak_mib: float  # largest peak RSS over the runs
    note: str = ""
    cpu: list[float] = field(default_factory=list)  # CPU seconds (user + system, workers included) of each run

    def row(self) -> str:
        spread = f"{min(self.runs):.2f}-{max(self.runs):.2f}"
        memory = f"{self.peak_mib:.0f} MiB" if self.peak_mib else "-"  # in-process timings measure no memory
        return f"| {self.name} | {self.seconds:.2f} s | {spread} s | {memory} | {self.note} |"


def run_process(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS in MiB, exit code and CPU seconds (its reaped workers included) of one child
    process. On a machine other work shares, the CPU seconds say what the wall time cannot."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def measure(name: str, args: list[str], repeat: int, before: Callable[[], None] = lambda: None, note: str = "",
            ok_codes: tuple[int, ...] = (0,)) -> Measurement:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    runs, peaks, cpu = [], [], []
    for _ in range(repeat):
        before()
        seconds, peak, code, used = run_process(args, env)
        if code not in ok_codes:
            raise SystemExit(f"{name}: {' '.join(args)} exited {code}")
        runs.append(seconds)
        peaks.append(peak)
        cpu.append(used)
    return Measurement(name, statistics.median(runs), runs, max(peaks), note, cpu)


def gpuc(*args: str) -> list[str]:
    return [sys.executable, "-m", "compiler", *args]


def bench_help(repeat: int, work: Path) -> list[Measurement]:
    return [measure("`gpuc --help` start-up", gpuc("--help"), max(repeat, 10), note="heavy imports deferred")]


_SET_ASIDE: list[Path] = []  # output trees of earlier runs, deleted when every benchmark is done
ASIDE = ".aside-"


def _set_aside(target: Path) -> None:
    """Make `target` absent for the next run without deleting it now. This VM's root file system is
    mounted with online discard: deleting 28,000 files just before a run bills that run for trimming
    their blocks (1-6 s of kernel time that has nothing to do with gpuc). Renaming costs nothing."""
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f"{target.name}{ASIDE}", dir=target.parent))
        target.rename(aside / "tree")
        _SET_ASIDE.append(aside)


def _fleet(work: Path, clusters: int, workloads: int, nodes: int = 8) -> Path:
    path = work / f"fleet-{clusters}x{workloads}"
    if not path.exists():
        generate(path, clusters, workloads, nodes, seed=7)
    return path


def bench_render(repeat: int, work: Path) -> list[Measurement]:
    out = []
    for clusters, workloads, label in ((20, 50, "20 clusters x 1,000 workloads (50 per cluster)"),
                                       (20, 1000, "20 clusters x 1,000 workloads each (20,000 workloads)")):
        fleet = _fleet(work, clusters, workloads)
        target = work / f"out-{clusters}x{workloads}"
        out.append(measure(f"render {label}, empty output directory", gpuc("render", str(fleet), "-o", str(target)), repeat,
                           before=lambda t=target: _set_aside(t), note="compile + checks + write"))
        out.append(measure(f"render {label}, re-render with no change", gpuc("render", str(fleet), "-o", str(target)), repeat,
                           note="unchanged files hard-linked"))
    return out


def bench_render_scaling(repeat: int, work: Path) -> list[Measurement]:
    out = []
    for factor in (1, 4, 16):
        fleet = _fleet(work, 5, 250 * factor)
        target = work / f"scale-{factor}"
        out.append(measure(f"render scaling {factor}x: 5 clusters x {250 * factor} workloads", gpuc("render", str(fleet), "-o", str(target)),
                           repeat, before=lambda t=target: _set_aside(t)))
    return out


def _same_trees(a: Path, b: Path) -> bool:
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return files(a) == files(b)


def bench_incremental(repeat: int, work: Path) -> list[Measurement]:
    """Cold full render vs a render after one workload's replicas changed, in the same run, and the tree
    checked byte-identical to a fresh render of the changed fleet: once with a folder of files per cluster,
    once with files that each hold workloads of five clusters (the cache keys documents, not files)."""
    rows = _incremental(repeat, work, "incremental-fleet", _fleet(work, 20, 1000), "a folder per cluster")
    mixed = work / "fleet-20x1000-spread5"
    if not mixed.exists():
        generate(mixed, 20, 1000, 8, seed=7, spread=5)
    return rows + _incremental(repeat, work, "incremental-spread", mixed, "files of 50 workloads of 5 clusters each")


def _incremental(repeat: int, work: Path, name: str, source: Path, layout: str) -> list[Measurement]:
    fleet = work / name
    if not fleet.exists():
        shutil.copytree(source, fleet)
    target, fresh = work / f"{name}-out", work / f"{name}-fresh"
    cache = work / f"{name}-cache"
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["GPUC_CACHE_DIR"] = str(cache)
    changed = next(iter(sorted((fleet / "workloads").rglob("*.yaml"))))
    lines = changed.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("replicas:"))
    # a value neither this run nor an earlier one over the same fleet copy used: the cache keeps the last few
    # versions of a cluster, and setting the value the file already holds would change nothing
    values = itertools.count(int(lines[at].split(":")[1]) + 1)

    def change_one_workload() -> None:
        lines[at] = f"  replicas: {next(values)}\n"  # the fleet's first workload shares one GPU (MPS): any count fits
        changed.write_text("".join(lines))

    label = f"render 20 x 1,000 workloads ({layout})"
    cold = measure(f"{label}, cold (no cache, empty output directory)",
                   gpuc("render", str(fleet), "-o", str(target), "--no-cache"), repeat, before=lambda: _set_aside(target))
    run_process(gpuc("render", str(fleet), "-o", str(target)), dict(os.environ, PYTHONPATH=str(REPO)))  # fill the cache
    warm = measure(f"{label} after one workload's replicas changed (cache warm)",
                   gpuc("render", str(fleet), "-o", str(target)), repeat, before=change_one_workload)
    still = measure(f"{label} with no change (cache warm)", gpuc("render", str(fleet), "-o", str(target)), repeat)
    _set_aside(fresh)
    run_process(gpuc("render", str(fleet), "-o", str(fresh), "--no-cache"), dict(os.environ, PYTHONPATH=str(REPO)))
    if not _same_trees(target, fresh):
        raise SystemExit(f"incremental ({layout}): the warm tree differs from a fresh render of the same fleet")
    cold_cpu = statistics.median(cold.cpu)

    def ratio(m: Measurement) -> str:
        cpu = statistics.median(m.cpu)
        return f"{m.seconds / cold.seconds:.2f} x cold (CPU {cpu:.1f} s: {cpu / cold_cpu:.2f} x cold's {cold_cpu:.1f} s)"

    warm.note = f"{ratio(warm)}; tree byte-identical to a fresh render"
    still.note = ratio(still)
    return [cold, warm, still]


def _plan_fleet(work: Path, nodes: int, pods: int) -> Path:
    path = work / f"plan-{nodes}n-{pods}p"
    if not path.exists():
        generate_plan(path, nodes, pods, seed=7)
    return path


def bench_plan(repeat: int, work: Path) -> list[Measurement]:
    fleet = _plan_fleet(work, 5000, 20000)
    return [measure("plan 20,000 pods on 5,000 nodes (36,000 H100s + 4,000 A100s as 16,000 MIG devices)",
                    gpuc("plan", str(fleet), "--output", "json"), repeat, note="compile + inventory + allocation")]


def bench_plan_scaling(repeat: int, work: Path) -> list[Measurement]:
    out = []
    for factor in (1, 4, 16):
        nodes, pods = 5000 * factor // 16, 20000 * factor // 16
        fleet = _plan_fleet(work, nodes, pods)
        out.append(measure(f"plan scaling {factor}x: {pods:,} pods on {nodes:,} nodes", gpuc("plan", str(fleet), "--output", "json"),
                           repeat))
    return out


def bench_cel(repeat: int, work: Path) -> list[Measurement]:
    """In one process: plain cel-python per device against the memoising engine, same results required."""
    fleet = _plan_fleet(work, 5000, 20000)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "benchmarks.cel_bench", str(fleet)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"cel: {done.stderr.strip() or done.stdout.strip()}")
    r = json.loads(done.stdout)
    label = f"CEL: {r['selectors']} selectors x {r['devices']:,} devices"
    return [Measurement(f"{label}, plain cel-python per device", r["plain_s"], [r["plain_s"]], 0, "the reference"),
            Measurement(f"{label}, memoised engine (cold memo)", r["cached_s"], [r["cached_s"]], 0,
                        f"{r['speedup']:.0f}x faster, identical results on every device")]


def bench_report(repeat: int, work: Path) -> list[Measurement]:
    """`gpuc plan --html` of a 5,000-node pool held by 5,000 workloads, and the page's load time in Chromium."""
    from .report_bench import browser_load_seconds, worst_case_fleet

    fleet = worst_case_fleet(work / "report-5000")
    page = work / "report-5000.html"
    out = [measure("plan --html: 5,000 nodes held by 5,000 workloads (5,000 distinct node layouts)",
                   gpuc("plan", str(fleet), "--html", str(page)), repeat)]
    loads = browser_load_seconds(page, repeat)
    if loads is None:
        return out + [Measurement("report load in headless Chromium: skipped, chromium or chromedriver not installed", 0, [0], 0)]
    size = page.stat().st_size // 1024
    return out + [Measurement(f"report load in headless Chromium ({size:,} KiB page)", statistics.median(loads), loads, 0,
                              "navigation to two frames after load")]


BENCHMARKS: dict[str, Callable[[int, Path], list[Measurement]]] = {
    "help": bench_help,
    "render": bench_render,
    "render-scaling": bench_render_scaling,
    "incremental": bench_incremental,
    "plan": bench_plan,
    "plan-scaling": bench_plan_scaling,
    "cel": bench_cel,
    "report": bench_report,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the median is reported)")
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--work", type=Path, help="directory for generated fleets and output (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BENCHMARKS)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpuc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["GPUC_CACHE_DIR"] = str(work / "cache")  # the incremental build's cache, kept out of the user's
    _SET_ASIDE.extend(work.glob(f"*{ASIDE}*"))  # left by an interrupted run: deleted at the end, like this run's
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; median of {args.repeat} runs; work dir {work}\n")
    print("| benchmark | median | range | peak memory | notes |\n|---|---|---|---|---|")
    results = []
    for name in names:
        for m in BENCHMARKS[name](args.repeat, work):
            print(m.row(), flush=True)
            results.append(m)
    for aside in _SET_ASIDE:
        shutil.rmtree(aside, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps([m.__dict__ for m in results], indent=2))


if __name__ == "__main__":
    main()
