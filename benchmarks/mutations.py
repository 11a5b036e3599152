"""Plant one bug at a time in the incremental cache, `gpuc diff` and the cluster-state code, and run the tests
that guard it: a planted change no test notices is a survivor, and the test suite has a hole there.

    python -m benchmarks.mutations [--root DIR] [--only SUBSTRING] [--jobs N]

The mutants are exact text replacements (each must match once, so a refactoring that moves the code makes
the run fail loudly instead of reporting a vacuous kill). They run in a copy of the checkout (`--root`,
default a fresh directory under /dev/shm or /tmp), never in the working tree. Categories: a key input
dropped from a cache key, a comparison weakened, a consumed-capacity path cut.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = ["tests/test_incremental.py", "tests/test_cache_adversarial.py"]
DIFF = ["tests/test_cache_adversarial.py", "tests/test_incremental.py", "tests/test_diff.py"]
STATE = ["tests/test_cluster_state.py", "tests/test_status.py", "tests/test_live_hostile.py"]


@dataclass(frozen=True)
class Mutant:
    name: str
    kind: str  # key input, comparison, consumed capacity
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


def m(name: str, kind: str, file: str, old: str, new: str, tests: list[str]) -> Mutant:
    return Mutant(name, kind, file, old, new, tuple(tests))


PLAN, KEYS, STORE, INC = "compiler/cache/plan.py", "compiler/cache/keys.py", "compiler/cache/store.py", "compiler/incremental.py"
PIPE, COMPARE, HELD, STATE_PY = "compiler/pipeline.py", "compiler/emit/diff/compare.py", "compiler/place/held.py", "compiler/load/state.py"

MUTANTS = [
    # key inputs
    m("cluster files left out of the key", "key input", PLAN, "value_digest([common, name, cluster_files,", "value_digest([common, name, [],", CACHE),
    m("class files left out of the key", "key input", PLAN, "cluster_files, sorted(class_files),", "cluster_files, [],", CACHE),
    m("workload files keyed by name, not content", "key input", PLAN, "sorted((rel, index.files[rel][0]) for rel in read)",
      "sorted(read)", CACHE),
    m("files of clusters sharing a workload file left out", "key input", PLAN,
      "read = set().union(needs[name], *(needs[n] for n in near))", "read = set(needs[name])", CACHE),
    m("spec.crds content left out of the key", "key input", PLAN, "tree_digest(root / own_crds, root) if own_crds else None", "None", CACHE),
    m("options left out of the key", "key input", PLAN, '"options": settings.options,', '"options": None,', CACHE),
    m("--crds content left out of the key", "key input", PLAN, '"crds": [tree_digest(d) for d in settings.crds]', '"crds": []', CACHE),
    m("gpuc build left out of the key", "key input", PLAN, 'value_digest({"build": build_digest(),', 'value_digest({"build": "",', CACHE),
    m("fact data files left out of the build digest", "key input", KEYS, 'SOURCE_SUFFIXES = (".py", ".yaml", ".lua")',
      'SOURCE_SUFFIXES = (".py", ".lua")', CACHE),
    m("the running cluster left out of the options", "key input", PLAN, '"state": objects}', '"state": None}', CACHE),
    m("allow-infeasible left out of the options", "key input", PLAN, '"allowInfeasible": allow_infeasible,', '"allowInfeasible": False,', CACHE),
    m("require-crds left out of the options", "key input", PLAN, '{"requireCrds": require_crds,', '{"requireCrds": False,', CACHE),
    # comparisons
    m("an index record trusted whatever the file's digest", "comparison", PLAN,
      "refs = known[1] if known is not None and known[0] == sha else scan(data)", "refs = known[1] if known is not None else scan(data)",
      CACHE),
    m("a changed file not treated as fresh", "comparison", PLAN, "if known is None or known[0] != sha:", "if known is None:", CACHE),
    m("the tree's file list not compared", "comparison", PLAN, "if found.keys() != entry.files.keys():", "if False:", CACHE),
    m("the tree's stamps not compared", "comparison", PLAN, "if stamps == entry.stamps:", "if True:", CACHE),
    m("the tree's contents not compared", "comparison", PLAN, "if digest(fh.read()) != want:", "if False:", CACHE),
    m("an entry's key and cluster not compared", "comparison", STORE,
      'if body.get("key") != key or body.get("cluster") != cluster:', "if False:", CACHE),
    m("checksums not compared", "comparison", STORE, 'if raw.get("checksum") != digest(json.dumps(body, sort_keys=True).encode()):',
      "if False:", CACHE),
    m("impossible counts accepted", "comparison", STORE, "and all(type(v) is int and v >= 0 for v in counts.values())", "", CACHE),
    m("fresh files not read by a warm build", "comparison", INC, "needed = set(plan.class_files).union(plan.fresh,",
      "needed = set(plan.class_files).union(", CACHE),
    m("no build when every cluster hits but files are fresh", "comparison", INC, "if misses or plan.fresh:", "if misses:", CACHE),
    m("an entry remembered for a cluster judged against the previous tree", "comparison", INC,
      "if outcome.digests is None or outcome.updated or name not in plan.keys:", "if outcome.digests is None or name not in plan.keys:",
      CACHE),
    m("diff: same cluster without comparing keys", "comparison", PIPE, "same = {n for n in now.hits if then.keys.get(n) == now.keys[n]}",
      "same = set(now.hits)", DIFF),
    m("diff: fresh files not read on a side", "comparison", PIPE,
      "set(plan.class_files).union(plan.fresh, *(plan.needs.get(name, set()) for name in built))",
      "set(plan.class_files).union(*(plan.needs.get(name, set()) for name in built))", DIFF),
    m("diff: a change of feasibility reported unchanged", "comparison", COMPARE, "and diff.feasible[0] == diff.feasible[1] and not broken:",
      "and not broken:", DIFF),
    m("diff: an added object not reported", "comparison", COMPARE,
      'out.objects.append(ObjectChange(b.kind, b.namespace, b.name, "added"))\n            continue', "continue", DIFF),
    m("diff: a GPU increase not seen", "comparison", COMPARE, "return after is not None and after > (before or 0)", "return False", DIFF),
    m("state: a live object covers a shorter list", "comparison", STATE_PY, "isinstance(live, list) and len(written) == len(live) and",
      "isinstance(live, list) and", STATE),
    # consumed-capacity paths
    m("capacity a running claim consumes not counted", "consumed capacity", HELD,
      "devices.append(HeldDevice(index, _consumed(r.get(\"consumedCapacity\"), str(r.get(\"driver\"))), r.get(\"adminAccess\") is True))",
      "devices.append(HeldDevice(index, None, r.get(\"adminAccess\") is True))", STATE),
    m("a running claim's devices not counted", "consumed capacity", HELD, "        if devices:\n            foreign.append(",
      "        if False:\n            foreign.append(", STATE),
    m("a running admin-access claim counted as holding its devices", "consumed capacity", HELD, 'r.get("adminAccess") is True))',
      "False))", STATE),
    m("a claim gpuc renders counted as held by another", "consumed capacity", HELD, "        if ownership.owns(claim):", "        if False:",
      STATE),
]


NONE = Mutant("no change (the tests must pass as they are)", "baseline", "compiler/__init__.py", "", "",
              tuple(sorted(set(CACHE + DIFF + STATE))))


def run(mutant: Mutant, root: Path) -> tuple[Mutant, bool, float, str]:
    """Plant the mutant in its own copy of `root` and run its tests there: (mutant, killed, seconds, last line)."""
    work = Path(tempfile.mkdtemp(prefix="gpuc-mutant-", dir=root.parent))
    try:
        shutil.copytree(root, work, dirs_exist_ok=True)
        path = work / mutant.file
        text = path.read_text()
        if mutant is not NONE and text.count(mutant.old) != 1:
            raise SystemExit(f"mutant '{mutant.name}': the text to replace occurs {text.count(mutant.old)} times in {mutant.file}")
        path.write_text(text.replace(mutant.old, mutant.new))
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
        where = subprocess.run([sys.executable, "-c", "import compiler; print(compiler.__file__)"], cwd=work, env=env, capture_output=True,
                               text=True, check=True).stdout.strip()
        if not Path(where).is_relative_to(work):
            raise SystemExit(f"the tests would import gpuc from {where}, not from the mutated copy {work}")
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)
        tail = (done.stdout.strip().splitlines() or [""])[-1]
        return mutant, done.returncode != 0, time.monotonic() - started, tail
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="checkout to copy for each mutant (default: this one)")
    parser.add_argument("--only", help="run the mutants whose name contains one of these comma-separated texts")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    chosen = [x for x in MUTANTS if args.only is None or any(part in x.name for part in args.only.split(","))]
    scratch = Path(tempfile.mkdtemp(prefix="gpuc-mutations-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    root = scratch / "root"
    shutil.copytree(args.root, root, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info"))
    shared = next((p / "shared" for p in args.root.resolve().parents if (p / "shared" / "reference").is_dir()), None)
    if shared is not None:  # the tests read ../shared/reference beside the checkout
        (scratch / "shared").symlink_to(shared)
    survivors = []
    try:
        _, failed, seconds, tail = run(NONE, root)
        print(f"baseline {seconds:6.1f} s  ({tail})", flush=True)
        if failed:
            raise SystemExit("the tests fail without any planted change: fix them first")
        with ThreadPoolExecutor(args.jobs) as pool:
            for mutant, killed, seconds, tail in pool.map(lambda x: run(x, root), chosen):
                print(f"{'killed ' if killed else 'SURVIVED'} {seconds:6.1f} s  [{mutant.kind}] {mutant.name}  ({tail})", flush=True)
                if not killed:
                    survivors.append(mutant)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{len(chosen) - len(survivors)} of {len(chosen)} planted changes killed")
    for mutant in survivors:
        print(f"  survived: [{mutant.kind}] {mutant.name} ({mutant.file})")
    sys.exit(1 if survivors else 0)


if __name__ == "__main__":
    main()
