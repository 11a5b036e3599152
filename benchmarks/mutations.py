"""Plant one bug at a time in the incremental cache, `gpuc diff`, the cluster-state code, the planner's sizing,
the lowering of tolerations and the checks, and run the tests that guard it: a planted change no test notices is a
survivor, and the test suite has a hole there.

    python -m benchmarks.mutations [--root DIR] [--only SUBSTRING] [--kind KIND] [--jobs N]

The mutants are exact text replacements (each must match once, so a refactoring that moves the code makes
the run fail loudly instead of reporting a vacuous kill). They run in a copy of the checkout (`--root`,
default a fresh directory under /dev/shm or /tmp), never in the working tree. Categories: a key input
dropped from a cache key, a comparison weakened, a consumed-capacity path cut, a size computed wrong (a term dropped,
a rounding turned, an off-by-one at a limit, the headroom's re-plan cut short), a toleration matched or derived
wrong, a check's limit moved or judged by the wrong feature. The baseline runs, unchanged, every test file the
chosen mutants name.
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
SIZES = ["tests/test_sizing.py", "tests/test_will_it_run.py", "tests/test_dra_features.py", "tests/test_lowering.py", "tests/test_rules.py"]
TOLERATE = ["tests/test_tolerations.py", "tests/test_seed_patterns.py", "tests/test_real_cluster.py"]
CHECKS = ["tests/test_check_dra_limits.py", "tests/test_check_objects.py", "tests/test_will_it_run.py", "tests/test_real_cluster.py",
          "tests/test_seed_patterns.py", "tests/test_check_cli.py"]
HEADROOM_TESTS, RULES = ["tests/test_headroom.py"], ["tests/test_rules.py"]


@dataclass(frozen=True)
class Mutant:
    name: str
    kind: str  # key input, comparison, consumed capacity, sizing, toleration, check
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


def m(name: str, kind: str, file: str, old: str, new: str, tests: list[str]) -> Mutant:
    return Mutant(name, kind, file, old, new, tuple(tests))


PLAN, KEYS, STORE, INC = "compiler/cache/plan.py", "compiler/cache/keys.py", "compiler/cache/store.py", "compiler/incremental.py"
PIPE, COMPARE, HELD, STATE_PY = "compiler/pipeline.py", "compiler/emit/diff/compare.py", "compiler/place/held.py", "compiler/load/state.py"
PLANNER, SIZING, HEADROOM = "compiler/plan/__init__.py", "compiler/plan/sizing.py", "compiler/place/headroom.py"
COST, CHART_VALUES = "compiler/emit/diff/cost.py", "compiler/validate/rules/chart_values.py"
TOLS, DRIVER, NODES, NIM = ("compiler/lower/tolerations.py", "compiler/lower/dra_driver.py", "compiler/lower/node_config.py",
                            "compiler/lower/workload_objects.py")
PLACEMENT, LIMITS, FABRIC, REQUESTS = ("compiler/check/placement.py", "compiler/check/dra_limits.py", "compiler/check/fabric_partitions.py",
                                       "compiler/check/nim_requests.py")

MUTANTS = [
    # key inputs
    m("cluster files left out of the key", "key input", PLAN, "value_digest([common, name, cluster_files,", "value_digest([common, name, [],", CACHE),
    m("class files left out of the key", "key input", PLAN, "cluster_files, sorted(classes), read,", "cluster_files, [], read,", CACHE),
    m("workload documents keyed by place, not content", "key input", PLAN, "docs[n].add((rel, ref.index, ref.span))",
      'docs[n].add((rel, ref.index, ""))', CACHE),
    m("files of clusters sharing a workload file left out", "key input", PLAN,
      "read = sorted(set().union(*(docs[n] for n in near[name])))", "read = sorted(docs[name])", CACHE),
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
    m("diff: a pool's cost compares GPUs only, not MIG slices", "comparison", COST,
      "return self.gpus[0] != self.gpus[1] or self.devices[0] != self.devices[1]", "return self.gpus[0] != self.gpus[1]", DIFF),
    m("state: a live object covers a shorter list", "comparison", STATE_PY, "isinstance(live, list) and len(written) == len(live) and",
      "isinstance(live, list) and", STATE),
    # consumed-capacity paths
    m("capacity a running claim consumes not counted", "consumed capacity", HELD,
      'consumed = _consumed(r.get("consumedCapacity"), str(r.get("driver")))', "consumed = None", STATE),
    m("a running claim's devices not counted", "consumed capacity", HELD, "        if devices:\n            foreign.append(",
      "        if False:\n            foreign.append(", STATE),
    m("a running admin-access claim counted as holding its devices", "consumed capacity", HELD, 'r.get("adminAccess") is True, str(',
      "False, str(", STATE),
    m("a claim gpuc renders counted as held by another", "consumed capacity", HELD, "mine, current = ownership.owns(claim), None",
      "mine, current = False, None", STATE),
    # sizing: the planner's GPU counts and the NIM cache
    m("cache compared with one profile's share of the files", "sizing", PLANNER, "if not cache.default and cache.size < cache.files:",
      "if not cache.default and cache.size < cache.files // cache.profiles:", SIZES),
    m("a cache of exactly the model's files refused", "sizing", PLANNER, "cache.size < cache.files:", "cache.size <= cache.files:", SIZES),
    m("one profile cached whatever the alternatives", "sizing", PLANNER,
      "profiles = len({a.gpus for a in plan.alternatives if a.viable}) if plan.tensor_parallelism is None else 1", "profiles = 1", SIZES),
    m("the files counted once, not per profile", "sizing", SIZING, '* float(table["precisionBytes"][model.precision])) * profiles',
      '* float(table["precisionBytes"][model.precision]))', SIZES),
    m("a default cache rounded down to its step", "sizing", SIZING, '-(-math.ceil(files * float(rules["headroom"]) / GIB) // step) * step',
      'math.ceil(files * float(rules["headroom"]) / GIB) // step * step', SIZES),
    m("a default cache without headroom", "sizing", SIZING, 'math.ceil(files * float(rules["headroom"]) / GIB)', "math.ceil(files / GIB)",
      SIZES),
    m("a default cache below the minimum", "sizing", SIZING, 'max(int(rules["minimumGiB"]), ', "max(0, ", SIZES),
    m("the KV cache left out of a model's need", "sizing", SIZING, 'need = n["weights"] + n["kv"]', 'need = n["weights"]', SIZES),
    m("the weight overhead not applied", "sizing", SIZING, "weights = math.ceil(model.parameters * bpp * overhead)",
      "weights = math.ceil(model.parameters * bpp)", SIZES),
    m("a replica's nodes left out of its share", "sizing", SIZING, "share = math.ceil(total / (tries * nodes))",
      "share = math.ceil(total / tries)", SIZES),
    m("a share group's other members left out", "sizing", SIZING, "total = need + sum(other for _, other in shared_with)", "total = need",
      SIZES),
    m("a pool with fewer GPUs per node than the count fits", "sizing", SIZING, "c[1] >= floor and c[2] >= tries", "c[1] >= floor", SIZES),
    m("the memory floor rounded to the nearest GiB", "sizing", SIZING, "whole = math.ceil(share / GIB) * GIB",
      "whole = round(share / GIB) * GIB", SIZES),
    m("a count of exactly a node's GPUs refused", "sizing", PLANNER,
      "if count is not None and serving and count > max(m.pool.spec.gpu.count for m in serving):\n        most",
      "if count is not None and serving and count >= max(m.pool.spec.gpu.count for m in serving):\n        most", SIZES),
    m("headroom re-planned with the pending pods only", "sizing", HEADROOM, "or [combined], pods)", "or [combined], pending)",
      HEADROOM_TESTS),
    # tolerations: which taint a toleration covers, and the tolerations gpuc derives
    m("a toleration's effect ignored", "toleration", TOLS, 'if toleration.get("effect") not in (None, "", effect):', "if False:",
      TOLERATE),
    m("an empty effect taken as a named one", "toleration", TOLS, 'not in (None, "", effect)', "not in (None, effect)", TOLERATE),
    m("operator Exists compared as Equal", "toleration", TOLS, 'if toleration.get("operator", "Equal") == "Exists":', "if False:",
      TOLERATE),
    m("Exists with an empty key tolerates one key only", "toleration", TOLS, 'return toleration.get("key") in (None, "", key)',
      'return toleration.get("key") == key', TOLERATE),
    m("Equal ignores the value", "toleration", TOLS, ' and toleration.get("value", "") == value', "", TOLERATE),
    m("a valued taint tolerated with Exists", "toleration", TOLS, '{"key": k, "operator": "Equal", "value": v, "effect": e} if v else ',
      "", TOLERATE),
    m("a derived toleration without the taint's effect", "toleration", TOLS, '{"key": k, "operator": "Exists", "effect": e}',
      '{"key": k, "operator": "Exists"}', TOLERATE),
    m("the kubelet plugin's chart defaults not written back", "toleration", DRIVER, 'plugin["tolerations"] = [*defaults, *extra]',
      'plugin["tolerations"] = extra', TOLERATE),
    m("the operands' chart defaults not written back", "toleration", NODES, '{"daemonsets": {"tolerations": [*defaults, *extra]}}',
      '{"daemonsets": {"tolerations": extra}}', TOLERATE),
    m("a NIM tolerates pools that cannot serve it", "toleration", NIM, "tolerate = tolerations(m.pool for m in plan.matches if m.ok)",
      "tolerate = tolerations(m.pool for m in plan.matches)", TOLERATE),
    m("the caching Job not given the tolerations", "toleration", NIM, '        cache_spec["tolerations"] = tolerate', "        pass",
      TOLERATE),
    m("the kubelet plugin tolerates only the DRA pools", "toleration", DRIVER,
      "served = [p for p in cluster.pools if p.dra or (features.compute_domains and p.gpu.multi_node_nvlink)]",
      "served = [p for p in cluster.pools if p.dra]", TOLERATE),
    # checks: the limits and rules gpuc judges its output by
    m("two pods on a single-node cache accepted", "check", PLACEMENT, "if count > 1:", "if count > 2:", CHECKS),
    m("a ReadWriteOncePod cache not judged", "check", PLACEMENT, 'SINGLE_NODE_MODES = ("ReadWriteOnce", "ReadWriteOncePod")',
      'SINGLE_NODE_MODES = ("ReadWriteOnce",)', CHECKS),
    m("a claim of exactly the device limit refused", "check", LIMITS, "if total > limit:", "if total >= limit:", CHECKS),
    m("exactly the limit of requests refused", "check", LIMITS, "if len(items) > limit:", "if len(items) >= limit:", CHECKS),
    m("exactly the limit of alternatives refused", "check", LIMITS, 'if len(subrequests) > self.limits["firstAvailable"]:',
      'if len(subrequests) >= self.limits["firstAvailable"]:', CHECKS),
    m("a CEL expression measured in characters, not bytes", "check", LIMITS, 'size = len(expression.encode("utf-8"))',
      "size = len(expression)", CHECKS),
    m("opaque parameters measured in characters, not bytes", "check", LIMITS, 'ensure_ascii=False).encode("utf-8"))',
      "ensure_ascii=False))", CHECKS),
    m("a 2-GPU claim needs no Fabric Manager partition", "check", FABRIC, "if total <= 1:", "if total <= 2:", CHECKS),
    m("a NIM naming a request its claim lacks accepted", "check", REQUESTS, "                    if name not in have:",
      "                    if False:", CHECKS),
    m("ComputeDomains switched off judged by the DRA pools", "check", CHART_VALUES, '("resources.computeDomains.enabled", "compute_domains",',
      '("resources.computeDomains.enabled", "gpu_resources",', RULES),
]


def baseline(chosen: list[Mutant]) -> Mutant:
    """No change, over every test file the chosen mutants run: a kill must come from the mutant, not from a failing test."""
    return Mutant("no change (the tests must pass as they are)", "baseline", "compiler/__init__.py", "", "",
                  tuple(sorted({t for x in chosen for t in x.tests})))


def run(mutant: Mutant, root: Path) -> tuple[Mutant, bool, float, str]:
    """Plant the mutant in its own copy of `root` and run its tests there: (mutant, killed, seconds, last line)."""
    work = Path(tempfile.mkdtemp(prefix="gpuc-mutant-", dir=root.parent))
    try:
        shutil.copytree(root, work, dirs_exist_ok=True)
        path = work / mutant.file
        text = path.read_text()
        if mutant.kind != "baseline" and text.count(mutant.old) != 1:
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
    parser.add_argument("--kind", help="run the mutants of these comma-separated kinds (key input, comparison, consumed capacity, "
                                       "sizing, toleration, check)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    chosen = [x for x in MUTANTS if (args.only is None or any(part in x.name for part in args.only.split(",")))
              and (args.kind is None or x.kind in args.kind.split(","))]
    if not chosen:
        raise SystemExit("no mutant matches --only / --kind")
    scratch = Path(tempfile.mkdtemp(prefix="gpuc-mutations-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    root = scratch / "root"
    shutil.copytree(args.root, root, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info"))
    shared = next((p / "shared" for p in args.root.resolve().parents if (p / "shared" / "reference").is_dir()), None)
    if shared is not None:  # the tests read ../shared/reference beside the checkout
        (scratch / "shared").symlink_to(shared)
    survivors = []
    try:
        _, failed, seconds, tail = run(baseline(chosen), root)
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
