"""The `gpuc` command line. Exit codes: 0 ok, 1 findings (infeasible, output the cluster would reject,
diff gate), 2 bad input (intents, CRD files, a previous tree that cannot be read).

Heavy modules are imported inside each command so that `gpuc --help` starts instantly.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2
COMPILE_EXITS = "0 ok, 1 findings (pods that cannot be placed, output the cluster would refuse), 2 bad input"
# every kind gpuc reads of a running cluster (facts: kubernetes.yaml clusterState; a test keeps them equal)
STATUS_EXPORT = ("kubectl get nodes,resourceslices,resourceclaims,resourceclaimtemplates,deviceclasses,computedomains,nimcaches,"
                 "nimservices,clusterpolicies,gpuclusters,namespaces,configmaps -A -o yaml > state.yaml")


def _print_diagnostics(diagnostics, as_json: bool) -> None:
    if as_json:
        return
    from .validate.secrets import redacted

    for d in redacted(diagnostics):
        print(d.render(), file=sys.stderr)


CI_OUTPUTS = ("github", "sarif")


def _ci_report(diagnostics, output: str) -> None:
    """--output github: workflow annotations on standard output; sarif: one SARIF document there."""
    from .emit.ci_report import github_annotations, sarif

    print(github_annotations(diagnostics) if output == "github" else sarif(diagnostics, _version().split()[-1]), end="")


def _guarded(run: Callable[[argparse.Namespace], int], outcome: str = "") -> Callable[[argparse.Namespace], int]:
    """Turn input errors into exit codes and messages; never a traceback for bad input.

    `outcome` says what the failure means for the command's output, for commands that write some."""

    def wrapper(args: argparse.Namespace) -> int:
        from .diagnostics import InfeasibleError, InputError

        try:
            return run(args)
        except InputError as exc:
            from .validate.secrets import redacted

            code = EXIT_FINDINGS if isinstance(exc, InfeasibleError) else EXIT_INPUT
            exc.diagnostics = redacted(exc.diagnostics)  # whatever quoted input before the documents were scanned
            if getattr(args, "output", "text") in CI_OUTPUTS:
                _ci_report(exc.diagnostics, args.output)
                errors = sum(1 for d in exc.diagnostics if d.severity == "error")
                print(f"gpuc: {errors} error(s)" + (f"; {outcome}" if outcome else ""), file=sys.stderr)
            elif getattr(args, "output", "text") == "json":
                print(json.dumps({"ok": False, "exitCode": code,
                                  "diagnostics": [d.as_dict() for d in exc.diagnostics]}, indent=2))
            else:
                _print_diagnostics(exc.diagnostics, False)
                errors = sum(1 for d in exc.diagnostics if d.severity == "error")
                print(f"gpuc: {errors} error(s)" + (f"; {outcome}" if outcome else ""), file=sys.stderr)
            for line in exc.after:
                print(line, file=sys.stderr)
            return code

    return wrapper


def _checks(args: argparse.Namespace):
    from .check.model import CheckOptions

    return CheckOptions(tuple(Path(d) for d in args.crds or ()), args.require_crds, args.allow_replace)


def _state(args: argparse.Namespace, report_warnings: bool = True):
    """The running cluster, from exports (--state, --slices) or read live (--kubeconfig/--context); None without."""
    from .diagnostics import Diagnostic, InputError

    files = list(getattr(args, "state", None) or []) + ([args.slices] if getattr(args, "slices", None) else [])
    live = getattr(args, "kubeconfig", None) is not None or getattr(args, "context", None) is not None
    if files and live:
        raise InputError([Diagnostic(files[0], 0, "--state", "--state and --kubeconfig/--context both describe the cluster",
                                     "read it one way: the export (CI) or live (a terminal)")])
    if files:
        from .load.state import read_state

        state = read_state(files, "--slices" if getattr(args, "slices", None) and not getattr(args, "state", None) else "--state")
    elif live:
        from .load.live import read_live

        state = read_live(args.kubeconfig, args.context)
    else:
        return None
    if report_warnings and getattr(args, "output", "text") != "json":
        _print_diagnostics(state.warnings, False)
    return state


def _cache(args: argparse.Namespace):
    """The incremental build's cache, unless --no-cache: --cache-dir, $GPUC_CACHE_DIR, or $XDG_CACHE_HOME/gpuc."""
    if getattr(args, "no_cache", True):
        return None
    from .cache.store import CacheStore, default_dir

    return CacheStore(Path(args.cache_dir or os.environ.get("GPUC_CACHE_DIR") or default_dir()))


def _plan_while_importing(args: argparse.Namespace, store, state, tree: Path):
    """The incremental build's plan (which clusters the cache has), made in a forked process while this one
    imports the compiler: reading the cache and checking the previous tree are I/O the imports can hide."""
    if store is None:
        return None
    import importlib

    from .cache.plan import Settings, safe_plan
    from .runner import overlapped

    settings = Settings.of(args.cluster, args.require_crds, args.allow_replace, args.allow_infeasible, state,
                           tuple(Path(d) for d in args.crds or ()))
    plan, _ = overlapped(lambda: safe_plan(Path(args.fleet), settings, store, tree),
                         lambda: importlib.import_module(f"{__package__}.incremental"), parallel=True)
    return plan


def _load(args: argparse.Namespace):
    """A large fleet's files start parsing in worker processes before the compiler is imported."""
    from .runner import load

    return load(args.fleet, args.jobs)


@_guarded
def cmd_validate(args: argparse.Namespace) -> int:
    from .diagnostics import Diagnostic, InputError

    if args.previous is not None and not Path(args.previous).is_dir():
        raise InputError([Diagnostic(str(args.previous), 0, "--previous", "directory does not exist",
                                     "pass the output directory of an earlier `gpuc render`")])
    state = _state(args)
    loaded = _load(args)
    from .pipeline import CompileOptions, compile_fleet

    # The same gate as render: a fleet validate passes is one render writes.
    options = CompileOptions(only=args.cluster, checks=_checks(args), previous=Path(args.previous) if args.previous else None,
                             keep=False, jobs=args.jobs, state=state)
    built = compile_fleet(loaded, options, built=_built_progress())
    built.raise_if_failed("`gpuc render` would refuse this fleet")
    checked = {c.name: c.checked for c in built.clusters.values()}
    if args.output in CI_OUTPUTS:
        _ci_report(built.warnings, args.output)
    elif args.output == "json":
        print(json.dumps({"ok": True, "clusters": sorted(checked), "checkedObjects": checked,
                          "warnings": [w.as_dict() for w in built.warnings]}, indent=2))
    else:
        _print_diagnostics(built.warnings, False)
        workloads = len({w.ref for name in checked for w in built.fleet.workloads_on(name)})
        print(f"ok: {workloads} workload(s) on {len(checked)} cluster(s) compile to "
              f"{sum(checked.values())} object(s) that pass the checks, and every pod fits"
              + (f" ({len(built.warnings)} warning(s))" if built.warnings else ""))
    return EXIT_OK


class _Progress:
    """`<what>: n/total` on a terminal, for work long enough to notice (placing pods, building clusters)."""

    def __init__(self, what: str, where: str, min_total: int = 2000) -> None:
        self.label = f"{what} {where}".strip()
        self.min_total = min_total
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        if total < self.min_total:
            return
        step = done * 100 // total
        if step != self.shown:
            self.shown = step
            print(f"\r{self.label}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)


def _progress_for(cluster: str):
    return _Progress("placing pods on", cluster) if sys.stderr.isatty() else None


def _built_progress():
    return _Progress("clusters built", "", min_total=10) if sys.stderr.isatty() else None


def _cannot_write(out: Path, reason: str):
    from .diagnostics import Diagnostic, InputError

    return InputError([Diagnostic(str(out), 0, "-o", f"cannot write the tree: {reason}; the previous tree is unchanged",
                                  "check the directory's permissions and free space")])


def _check_targets(out: Path, clusters: list[str]) -> None:
    """Refuse to replace out/<cluster> directories that hold something gpuc did not write."""
    from .diagnostics import Diagnostic, InputError
    from .emit.staging import foreign_targets

    try:
        foreign = foreign_targets(out, clusters)
    except OSError as exc:
        raise InputError([Diagnostic(str(out), 0, "-o", f"cannot read the output directory: {exc.strerror or exc}",
                                     "check the directory's permissions")]) from None
    if foreign:
        raise InputError([
            Diagnostic(str(p), 0, "-o", "holds files gpuc did not write, and a render replaces it whole",
                       "move them elsewhere, or render into another directory") if p.parent == out else
            Diagnostic(str(p), 0, "-o", f"gpuc did not write this file, and a render replaces (or removes) {p.relative_to(out).parts[0]}/ whole",
                       "move it out of the rendered cluster directories (e.g. beside them in -o), or delete it")
            for p in foreign])


def _release(lock: int | None, created: list[Path]) -> None:
    """Remove the directories a failed first render made (innermost first: no new parent is left behind), then
    let the next render have the output directory."""
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            directory.rmdir()
    if lock is not None:
        os.close(lock)


def _cache_notes(store, planned) -> list[str]:
    """What the incremental build could not read or write of the cache (it then built without it)."""
    if store is None:
        return []
    return [f"gpuc: note: {note}" for note in (planned.notes if planned is not None else []) + store.notes]


@functools.partial(_guarded, outcome="nothing was written")
def cmd_render(args: argparse.Namespace) -> int:
    """Build every cluster into a staging directory inside -o (the workers write it), then swap it in:
    nothing in -o changes unless every cluster passed and every file was written."""
    import shutil

    from .diagnostics import Diagnostic, InputError
    from .emit.staging import Busy, StagingError, leaving_clusters, lock_tree, make_dirs, stage_cluster, stage_tree, swap_in

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError([Diagnostic(str(out), 0, "-o", "is a file; gpuc renders into a directory", "pass a directory path to -o")])
    created: list[Path] = []
    lock: int | None = None
    try:  # one render at a time writes a directory: the lock is held until the swapped tree is clean
        created = make_dirs(out)
        lock = lock_tree(out)
        staging = stage_tree(out)
    except (OSError, Busy) as exc:
        _release(lock, created)
        if isinstance(exc, Busy):
            raise InputError([Diagnostic(str(out), 0, "-o", "another gpuc render is writing this directory now",
                                         "wait for it to finish and render again, or render into another directory")]) from None
        raise _cannot_write(out, exc.strerror or str(exc)) from None
    done = False
    store = planned = None
    try:
        state = _state(args)
        store = _cache(args)
        planned = _plan_while_importing(args, store, state, out)
        from .incremental import compile_cached, remember
        from .pipeline import CompileOptions

        # the tree about to be replaced is the previous state; the build workers stage what passes, and
        # clusters the cache has are linked from it unchanged
        options = CompileOptions(only=args.cluster, checks=_checks(args), previous=out, allow_infeasible=args.allow_infeasible,
                                 keep=False, jobs=args.jobs, state=state)
        plan = planned
        built = compile_cached(Path(args.fleet), options, plan, write=functools.partial(stage_cluster, out, staging),
                               built=_built_progress())
        built.raise_if_failed()
        kept = tuple(plan.hits) if plan is not None else ()  # already in out/ exactly as they would be written
        trees = {c.name: c.paths for c in built.clusters.values()}
        _check_targets(out, [c for c in trees if c not in kept] + (leaving_clusters(out, [*trees, *kept]) if args.cluster is None else []))
        try:
            swap_in(out, staging, [c for c in trees if c not in kept], prune_other_clusters=args.cluster is None, kept=kept)
        except OSError as exc:
            raise _cannot_write(out, exc.strerror or str(exc)) from None
        done = True
        if store is not None:
            remember(store, Path(args.fleet), plan, built, out)
    except (StagingError, InputError) as exc:  # StagingError: a build worker could not write its cluster
        failure = exc if isinstance(exc, InputError) else _cannot_write(out, str(exc))
        failure.after = _cache_notes(store, planned)  # what the cache could not be trusted with, after the findings
        raise failure from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        _release(lock, [] if done else created)
    print("".join(f"{note}\n" for note in _cache_notes(store, planned)), end="", file=sys.stderr)
    if args.output in CI_OUTPUTS:
        _ci_report(built.warnings, args.output)
    elif args.output == "json":
        print(json.dumps({"ok": True, "out": str(args.out),
                          "clusters": trees,
                          "warnings": [w.as_dict() for w in built.warnings]}, indent=2))
    else:
        _print_diagnostics(built.warnings, False)
        for c in built.clusters.values():
            releases = f"{c.releases} Helm release{'' if c.releases == 1 else 's'}"
            print(f"{c.name}: {c.objects} objects, {releases}, {c.applications} Argo CD Applications -> {Path(args.out) / c.name}")
    return EXIT_OK


@functools.partial(_guarded, outcome="nothing was written")
def cmd_init(args: argparse.Namespace) -> int:
    """Write a new fleet directory, all or nothing (a temporary directory renamed into place)."""
    import shutil
    import tempfile

    from .diagnostics import Diagnostic, InputError
    from .emit.scaffold import scaffold
    from .facts.new_cluster import new_cluster

    target = Path(args.directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InputError([Diagnostic(str(target), 0, "DIRECTORY", "exists and is not empty: gpuc init writes a new fleet",
                                     "pass a new directory name")])
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.cluster):
        raise InputError([Diagnostic(args.cluster, 0, "--cluster", "a cluster name is a DNS label (lower-case letters, digits, '-')",
                                     "e.g. --cluster prod-east")])
    files = scaffold(args.cluster, new_cluster(), args.repo_url, args.ci)
    parent = target.resolve().parent
    tmp: Path | None = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".gpuc-init-", dir=parent))
        for rel, text in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text, encoding="utf-8")
        if target.exists():
            target.rmdir()
        tmp.rename(target)
    except OSError as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise InputError([Diagnostic(str(target), 0, "DIRECTORY", f"cannot write the fleet: {exc.strerror or exc}",
                                     "check the directory's permissions")]) from None
    shown = sorted(f for f in files if not f.startswith(".github/")) + ([".github/workflows/ (gpuc diff, gpuc render)"] if args.ci else [])
    print(f"wrote {target}/ ({', '.join(shown)}); next: cd {target}, git init, gpuc validate . and gpuc render . -o rendered "
          "(rendered/ is committed: Argo CD syncs it from this repository)"
          + ("" if args.repo_url else "; set spec.gitops.repoURL to the repository's URL (or pass --repo-url)")
          + ("; set the repository variable GPUC to the gpuc release CI installs" if args.ci else ""))
    return EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    from .emit.catalog import catalog_data, catalog_text

    if args.matrix:
        from .emit.platform_matrix import matrix_page
        from .matrix import cases, judge

        print(matrix_page(judge(cases())), end="")
        return EXIT_OK
    if args.new_cluster:
        from .emit.new_cluster import cases as choice_cases
        from .emit.new_cluster import new_cluster_page
        from .facts.new_cluster import kubernetes_minors, new_cluster
        from .matrix import judge

        choice = new_cluster()
        print(new_cluster_page(choice, judge(choice_cases(choice, kubernetes_minors()))), end="")
        return EXIT_OK
    data = catalog_data()
    print(json.dumps(data, indent=2) if args.output == "json" else catalog_text(data), end="" if args.output != "json" else "\n")
    return EXIT_OK


@_guarded
def cmd_explain(args: argparse.Namespace) -> int:
    from .diagnostics import Diagnostic, InputError, did_you_mean
    from .emit.explain import explain_data, explain_text, explain_warnings
    from .pipeline import CompileOptions, compile_fleet

    state = _state(args)
    compilation = compile_fleet(args.fleet, CompileOptions(only=args.cluster, checks=_checks(args), state=state, jobs=args.jobs))
    everything = [f"{w.model.metadata.namespace}/{w.model.metadata.name}" for w in compilation.fleet.workloads]
    if args.workload is None:  # what can be explained
        if args.output == "json":
            print(json.dumps({"workloads": everything}, indent=2))
        else:
            print("workloads (gpuc explain FLEET NAME, or namespace/name when a name repeats):")
            print("".join(f"  {name}\n" for name in everything), end="")
        return EXIT_OK
    found = compilation.fleet.workloads_named(args.workload)
    if len(found) != 1:
        names = [f"{w.model.metadata.namespace}/{w.model.metadata.name}" for w in found] if found else everything
        message = f"no workload named '{args.workload}'" if not found else f"'{args.workload}' names {len(found)} workloads"
        short = sorted({n.split("/")[-1] for n in everything} | set(everything))
        hint = ("name one as namespace/name: " + ", ".join(names)) if found else \
            (did_you_mean(args.workload, short) or "workloads: " + ", ".join(names))
        raise InputError([Diagnostic(str(args.fleet), 0, "WORKLOAD", message, hint)])
    data = explain_data(compilation, args.workload)
    print(json.dumps(data, indent=2) if args.output == "json" else explain_text(data), end="" if args.output != "json" else "\n")
    failure = compilation.failure("`gpuc render` would refuse this fleet")
    if failure is not None:  # the explanation is what helps most then: shown, and the run still fails
        if args.output != "json":
            _print_diagnostics(failure.diagnostics, False)
        return EXIT_FINDINGS
    _print_diagnostics(explain_warnings(compilation, args.workload, data), args.output == "json")
    return EXIT_OK


@_guarded
def cmd_plan(args: argparse.Namespace) -> int:
    from .diagnostics import Diagnostic, InputError
    from .emit.plan_report import plan_text
    from .pipeline import CompileOptions, compile_fleet

    options = CompileOptions(only=args.cluster, checks=_checks(args), detail=True, state=_state(args), jobs=args.jobs)
    compilation = compile_fleet(args.fleet, options, progress=_progress_for)
    plans = [c.placement for c in compilation.clusters.values() if c.placement is not None]
    # clusters that did not compile have no placement, and output the checks refuse would not be applied
    blocking = [d for c in compilation.clusters.values() for d in (c.infeasible if c.placement is None else []) + c.rejected]
    feasible = not blocking and all(p.feasible for p in plans)
    if args.html:
        from .emit.capacity_html import capacity_html
        from .emit.staging import write_file_atomically

        fleet = Path(args.fleet).resolve().name or str(args.fleet)  # `gpuc plan .` names the directory, not ""
        scope = f"cluster {args.cluster} of {fleet}" if args.cluster else f"{fleet} ({len(plans)} cluster{'s' if len(plans) != 1 else ''})"
        page = capacity_html(plans, f"GPU capacity: {scope}")
        try:
            write_file_atomically(Path(args.html), page)
        except OSError as exc:
            raise InputError([Diagnostic(str(args.html), 0, "--html", f"cannot write the report: {exc.strerror or exc}",
                                         "pass a path in an existing, writable directory")]) from None
    if args.output == "json":
        print(json.dumps({"ok": feasible, "clusters": [p.as_dict() for p in plans],
                          "problems": [d.as_dict() for d in sorted(set(blocking))],
                          "warnings": [w.as_dict() for w in compilation.warnings]}, indent=2))
    else:
        _print_diagnostics(compilation.warnings + [w for p in plans for w in p.warnings] + sorted(set(blocking)), False)
        print("\n".join(plan_text(p) for p in plans), end="")
    return EXIT_OK if feasible else EXIT_FINDINGS


@_guarded
def cmd_inventory(args: argparse.Namespace) -> int:
    from .emit.yaml_out import dump
    from .pipeline import CompileOptions, compile_fleet
    from .place import synthesize_for
    from .place.inventory.codec import inventory_list

    compilation = compile_fleet(args.fleet, CompileOptions(only=args.cluster, checks=_checks(args), jobs=args.jobs))
    compiled = compilation.clusters[args.cluster].compiled
    if compiled is None:  # sizing failed: the findings say why
        compilation.raise_if_failed("no inventory was printed")
    assert compiled is not None
    source = f"synthesized by gpuc from {compiled.cluster.intent.ref}"
    listing = inventory_list(synthesize_for(compiled), {"gpuc.dev/source": source})
    _print_diagnostics(compilation.warnings, args.output == "json")
    print(json.dumps(listing, indent=2) if args.output == "json" else dump(listing), end="\n" if args.output == "json" else "")
    return EXIT_OK


@functools.partial(_guarded, outcome="no diff was produced")
def cmd_diff(args: argparse.Namespace) -> int:
    from .emit.diff.report import as_json, cost_diagnostics, markdown
    from .pipeline import diff_fleet

    diff = diff_fleet(Path(args.fleet), args.base, args.cluster, _checks(args), state=_state(args), store=_cache(args))
    gated = sorted(set(args.fail_on) & diff.conditions())
    if args.output in CI_OUTPUTS:  # the cost of the change, and why the head would be refused, on the intents' lines
        _ci_report(cost_diagnostics(diff) + [d for c in diff.clusters if c.changed for d in c.all_problems()], args.output)
    else:
        print(as_json(diff, gated) if args.output == "json" else markdown(diff, gated), end="" if args.output != "json" else "\n")
    for condition in gated:
        print(f"gpuc diff: --fail-on {condition} tripped: {diff.why(condition)}", file=sys.stderr)
    return EXIT_FINDINGS if gated else EXIT_OK


@functools.partial(_guarded, outcome="no plan was written")
def cmd_upgrade(args: argparse.Namespace) -> int:
    from .emit.upgrade.report import as_json, markdown
    from .emit.upgrade.write import write_plans
    from .upgrade import upgrade_fleet

    plan = upgrade_fleet(Path(args.fleet), args.base, args.cluster, _checks(args), state=_state(args))
    files = {c.cluster: _cluster_file(Path(args.fleet), c.cluster) for c in plan.clusters}
    if args.out:
        write_plans(Path(args.out), plan.clusters, args.fleet, files, plan.base, plan.commit)
    if args.output == "json":
        print(as_json(plan.clusters, plan.base, plan.commit))
    else:
        print(markdown(plan.clusters, args.fleet, files), end="")
        if args.out and any(c.staged for c in plan.clusters):
            print(f"\nThe plan and each step's rendered tree: {args.out}/<cluster>/ (plan.md, plan.json, step-N/)")
    return EXIT_OK


def _cluster_file(fleet: Path, cluster: str) -> str:
    """The intent file that holds the cluster (clusters/<name>.yaml by convention), for the plan's instructions."""
    named = fleet / "clusters" / f"{cluster}.yaml"
    return f"clusters/{cluster}.yaml" if named.is_file() else f"the clusters/ file of {cluster}"


def _gates(text: str) -> list[str]:
    from .emit.diff.gates import GATES

    gates = [g.strip() for g in text.split(",") if g.strip()]
    unknown = [g for g in gates if g not in GATES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown condition {', '.join(unknown)}; choose from {', '.join(GATES)}")
    return gates


def cmd_schema(args: argparse.Namespace) -> int:
    from .emit.schema import input_schema

    if args.markdown:
        from .emit.reference import intent_reference

        print(intent_reference(input_schema()), end="")
        return EXIT_OK
    print(json.dumps(input_schema(), indent=2, sort_keys=True))
    return EXIT_OK


@_guarded
def cmd_status(args: argparse.Namespace) -> int:
    from .diagnostics import Diagnostic, InputError

    state = _state(args, report_warnings=False)  # they are findings of the report (check `access`), in text and JSON
    if state is None:
        raise InputError([Diagnostic(str(args.fleet), 0, "--state", "gpuc status needs the running cluster",
                                     f"pass --state FILE (an export: `{STATUS_EXPORT}`) or --kubeconfig/--context")])
    from .emit.status_report import status_json, status_text
    from .pipeline import status_cluster

    report = status_cluster(args.fleet, args.cluster, state, _checks(args))
    print(status_json([report]) if args.output == "json" else status_text(report), end="")
    return EXIT_FINDINGS if report.failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from .emit.diff.gates import GATES

    parser = argparse.ArgumentParser(prog="gpuc", description="Compile GPU intents into the Kubernetes DRA stack.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, func, help_text: str, fleet: bool = True, outputs: tuple[str, ...] = ("text", "json"),
            exits: str = COMPILE_EXITS) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=f"exit codes: {exits}")
        if fleet:
            p.add_argument("fleet", metavar="FLEET", help="fleet directory (clusters/ and workloads/)")
        p.add_argument("--output", choices=outputs, default=outputs[0], help="output format")
        p.set_defaults(func=func)
        return p

    def add_checks(p: argparse.ArgumentParser, jobs: bool = True) -> None:
        """The inputs every command that compiles takes, so a warning can be answered where it appears."""
        if jobs:
            p.add_argument("--jobs", type=int, metavar="N",
                           help="worker processes for parsing and building (default: one per core for large fleets; "
                                "1: everything in this process)")
        p.add_argument("--crds", action="append", metavar="DIR",
                       help="directory of CRD YAMLs (searched recursively) to check custom resources against; "
                            "repeatable; a cluster's spec.crds directory is searched first")
        p.add_argument("--require-crds", action="store_true",
                       help="fail when a custom resource kind has no CRD (default: a warning)")
        p.add_argument("--allow-replace", action="store_true",
                       help="accept changes to immutable fields gpuc knows how to replace (reported as warnings)")

    def add_cache(p: argparse.ArgumentParser) -> None:
        p.add_argument("--no-cache", action="store_true", help="build every cluster, neither reading nor writing the cache")
        p.add_argument("--cache-dir", metavar="DIR", help="where the incremental build keeps what it knows "
                                                          "(default: $GPUC_CACHE_DIR, else $XDG_CACHE_HOME/gpuc)")

    def add_state(p: argparse.ArgumentParser) -> None:
        p.add_argument("--state", action="append", metavar="FILE",
                       help="the running cluster as `kubectl get resourceslices,resourceclaims,deviceclasses,nodes -A -o yaml` "
                            "exports it (a List, a multi-document stream or JSON; repeatable; - reads standard input): "
                            "its ResourceSlices replace the synthesized devices and its allocated claims hold theirs; "
                            "needs --cluster when the fleet has several clusters")
        p.add_argument("--kubeconfig", metavar="FILE", help="read the running cluster live instead (the same kinds as --state)")
        p.add_argument("--context", metavar="NAME", help="the kubeconfig context to read (default: the current one)")

    validate = add("validate", cmd_validate, "compile the intents and check the output, without writing anything",
                   outputs=("text", "json", *CI_OUTPUTS))
    validate.add_argument("--cluster", help="validate only this cluster")
    add_checks(validate)
    add_state(validate)
    validate.add_argument("--previous", metavar="DIR",
                          help="an earlier render's output directory: check updates against it (immutable fields, CRD transition rules)")
    render = add("render", cmd_render, "check and write the rendered tree Argo CD consumes (nothing is written on errors)",
                 outputs=("text", "json", *CI_OUTPUTS))
    render.add_argument("-o", "--out", required=True, help="output directory (one sub-directory per cluster)")
    render.add_argument("--cluster", help="render only this cluster")
    add_checks(render)
    add_cache(render)
    render.add_argument("--allow-infeasible", action="store_true",
                        help="render even when some pods cannot be placed on the cluster's devices")
    add_state(render)
    plan = add("plan", cmd_plan, "place every pod's claims on the cluster's devices, offline, like the scheduler",
               exits="0 every pod placed, 1 some cannot be (or output the checks refuse), 2 bad input")
    plan.add_argument("--cluster", help="plan only this cluster")
    plan.add_argument("--html", metavar="FILE", help="also write a self-contained HTML capacity report to FILE")
    add_checks(plan)
    add_state(plan)
    plan.add_argument("--slices", metavar="FILE", help="the cluster's ResourceSlices alone (kubectl get resourceslices -o yaml): "
                                                       "an export --state reads too")
    inventory = add("inventory", cmd_inventory, "print the ResourceSlices the cluster's DRA driver would publish",
                    exits="0 ok, 1 the cluster cannot be sized, 2 bad input")
    inventory.add_argument("--cluster", required=True, help="the cluster")
    add_checks(inventory)
    explain = add("explain", cmd_explain, "show sizing, pools and objects behind one workload (without one: list the workloads)")
    explain.add_argument("workload", metavar="WORKLOAD", nargs="?", help="workload name or namespace/name")
    explain.add_argument("--cluster", help="explain it on this cluster only")
    add_checks(explain)
    add_state(explain)
    diff = add("diff", cmd_diff, "explain what an intent change does to each cluster (Markdown for a PR comment)",
               outputs=("markdown", "json", *CI_OUTPUTS),
               exits="0 a report (whatever it says), 1 a --fail-on condition holds, 2 bad input in the working tree (a base "
                     "that does not compile is reported, not an error)")
    diff.add_argument("--base", required=True, metavar="REF", help="git commit-ish to compare against, e.g. origin/main")
    diff.add_argument("--cluster", help="compare only this cluster")
    add_checks(diff, jobs=False)
    diff.add_argument("--fail-on", type=_gates, action="extend", default=[], metavar="CONDITIONS",
                      help="exit 1 when the diff has any of these conditions (comma-separated, repeatable): "
                           + ", ".join(GATES))
    add_state(diff)
    add_cache(diff)
    upgrade = add("upgrade", cmd_upgrade, "plan a change a running cluster cannot take as one commit (a DRA driver line, a pool "
                  "moving to DRA, the GPU Operator's GPUCluster, a Kubernetes minor, a MIG layout under running pods) as "
                  "ordered steps, each one commit with its checks",
                  exits="0 a plan (or none needed), 2 bad input, or a change gpuc cannot stage (its line, and what to do instead)")
    upgrade.add_argument("--base", required=True, metavar="REF", help="git commit-ish the clusters run now, e.g. origin/main")
    upgrade.add_argument("--cluster", help="plan only this cluster")
    upgrade.add_argument("-o", "--out", metavar="DIR", help="write each cluster's plan (plan.md, plan.json) and every step's rendered tree "
                                                          "to DIR/<cluster>/")
    add_checks(upgrade, jobs=False)
    add_state(upgrade)
    status = add("status", cmd_status, "check the running cluster against the fleet: DRA served, DeviceClasses, CDI, "
                                        "ResourceSlices, device plugin, claims, NIM, ComputeDomains, MIG, drift. "
                                        f"Export every kind it reads with `{STATUS_EXPORT}` "
                                        "(a kind left out is skipped, not missing)",
                 exits="0 no check failed, 1 a check failed, 2 bad input")
    status.add_argument("--cluster", required=True, help="the cluster the state describes")
    add_checks(status)
    add_state(status)
    init = add("init", cmd_init, "write a new fleet (one cluster, one workload) that validates, laid out as the root of its git "
                                 "repository", fleet=False, outputs=("text",), exits="0 written, 2 the directory exists and is not empty, "
                                                                                     "or cannot be written")
    init.add_argument("directory", metavar="DIRECTORY", help="the new fleet directory")
    init.add_argument("--cluster", default="my-cluster", help="the cluster's name (default: my-cluster)")
    init.add_argument("--ci", choices=("github",), help="also write the CI workflows: github, GitHub Actions that post gpuc diff "
                                                       "on pull requests and render on main (the gpuc they install is the "
                                                       "repository variable GPUC)")
    init.add_argument("--repo-url", metavar="URL", help="the git URL of the fleet's repository, where Argo CD reads rendered/ "
                                                       "(spec.gitops.repoURL; default: a placeholder to replace)")
    catalog = add("catalog", cmd_catalog, "list the GPU models, MIG profiles, DRA driver lines and Kubernetes versions gpuc knows",
                  fleet=False, exits="0")
    catalog.add_argument("--matrix", action="store_true", help="compile every Kubernetes minor with every DRA driver line and "
                                                              "operator release, and print the platform matrix page "
                                                              "(docs/reference/platform-matrix.md)")
    catalog.add_argument("--new-cluster", action="store_true", help="print which DRA driver line and GPU Operator mode a new "
                                                                   "cluster should take, and why (docs/how-to/new-cluster.md; "
                                                                   "what gpuc init writes)")
    schema = add("schema", cmd_schema, "print the JSON Schema of the input kinds", fleet=False, exits="0")
    schema.add_argument("--markdown", action="store_true", help="print the intent format reference page instead "
                                                                "(docs/reference/intent-format.md)")
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"gpuc {version('gpuc')}"
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "gpuc (not installed)"


def main(argv: list[str] | None = None) -> int:
    """The command line. Exit 0 ok, 1 findings (a gate tripped), 2 bad input, or gpuc itself failing: a crash
    must never read as "gate tripped" in CI, so it is exit 2 with one line (GPUC_DEBUG=1 shows the traceback)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `gpuc`
        parser.print_help()
        return EXIT_OK
    from .diagnostics import show_paths_from

    show_paths_from(getattr(args, "fleet", None))
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("gpuc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `gpuc plan ... | head`: the reader left; say nothing, as cat and grep do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's own flush at exit would raise again
        return 141  # 128 + SIGPIPE, what a shell reports for a process killed by it
    except Exception as exc:  # the last line of defence: everything else is handled where it happens
        if os.environ.get("GPUC_DEBUG"):
            raise
        print(f"gpuc: internal error in `gpuc {args.command}`: {type(exc).__name__}: {exc}\n"
              "    hint: this is a bug in gpuc, not in your input; run again with GPUC_DEBUG=1 for the traceback and "
              "report it", file=sys.stderr)
        return EXIT_INPUT


def run() -> None:
    """The `gpuc` process. A run is a batch job of a few seconds that builds millions of long-lived,
    acyclic objects (the validated fleet, inventories): without the cyclic collector, which would
    rescan them all (0.25 s of a 20,000-workload render), and reference counting frees the rest."""
    import gc

    gc.disable()
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
