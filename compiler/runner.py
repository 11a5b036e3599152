"""Performance plumbing, in one place: forked workers, the garbage-collector scope and cache warm-up.

The stages are plain functions that know nothing of processes; the pipeline hands them to this
module when a fleet is large enough for parallelism to pay.

- Parsing: libyaml is the largest serial cost of loading a large fleet (1 s for 20,000 workloads,
  5.5 MB), all of it before the first cluster can be built. Files are independent, so above
  PARALLEL_MIN_BYTES forked workers parse them in chunks and send back plain values, marshalled (a
  sixth of pickle's cost: parsed YAML is only dicts, lists, strings and numbers). The parent is free
  meanwhile, and warms the caches that the build workers, forked later, inherit.
- Building: clusters are independent once the fleet is validated, so above PARALLEL_MIN_WORKLOADS
  they are built by forked workers that inherit the validated fleet instead of receiving it.
- Garbage collection: a run builds millions of long-lived, acyclic objects (the validated fleet,
  inventories); CPython's cyclic collector would rescan them on every full collection (half the run
  time of a large plan), so a run happens without it. Reference counting still frees everything.

Results always come back in input order, so output never depends on which worker finished first.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from .diagnostics import Diagnostic, InputError
from .load.fleet import FleetFiles, Parsed, ReadFiles, ReadOne, load_fleet
from .load.yaml_source import SourceDoc

if TYPE_CHECKING:
    from .validate.documents import CheckedDocument

PARALLEL_MIN_BYTES = 1 << 20  # below this a fork costs more than it saves
CHUNKS_PER_WORKER = 4  # uneven files still balance across the workers
PARALLEL_MIN_WORKLOADS = 2_000  # below this a build fork costs more than it saves
OVERLAP_MIN_OBJECTS = 2_000  # a cluster this large checks its output in a fork while this process places its pods

T = TypeVar("T")
R = TypeVar("R")


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    """Workers here are forked: they inherit what the parent built instead of being sent it."""
    return "fork" in multiprocessing.get_all_start_methods()


@contextlib.contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """A scope without the cyclic collector (see the module docstring); nests, and restores on exit."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ------------------------------------------------------------------------------------------ parsing

def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the read reports it


_READ: ReadOne | None = None  # set before forking; the workers inherit it


def _parse_chunk(files: list[tuple[Path, str]]) -> bytes:
    """In a worker: each file's documents, or its diagnostics, as marshalled tuples."""
    assert _READ is not None
    out: list[tuple[bool, list[tuple]]] = []
    for path, display in files:
        try:
            out.append((True, [(d.file, d.index, d.value, d.text, d.start_line) for d in _READ(path, display)]))
        except InputError as exc:
            out.append((False, [(d.file, d.line, d.path, d.message, d.hint, d.severity) for d in exc.diagnostics]))
    return marshal.dumps(out)


def _unpack(chunk: bytes) -> Iterator[tuple[bool, Parsed]]:
    for ok, items in marshal.loads(chunk):
        yield (True, [SourceDoc(*item) for item in items]) if ok else (False, [Diagnostic(*item) for item in items])


def _chunks(files: list[tuple[Path, str]], count: int) -> list[list[tuple[Path, str]]]:
    size = max(1, -(-len(files) // count))
    return [files[i:i + size] for i in range(0, len(files), size)]


def parallel_reader(jobs: int | None = None) -> ReadFiles:
    """A `load_fleet` reader that parses large sets of files in forked workers (`jobs`, default one per
    core) and runs the loader's `meanwhile` in this process while they parse."""

    def read_files(files: list[tuple[Path, str]], read: ReadOne,
                   meanwhile: Callable[[], None] | None) -> Iterator[tuple[bool, Parsed]]:
        global _READ
        workers = min(jobs if jobs is not None else cores(), len(files))
        if workers < 2 or not can_fork() or sum(_size(p) for p, _ in files) < PARALLEL_MIN_BYTES:
            for path, display in files:
                try:
                    yield True, read(path, display)
                except InputError as exc:
                    yield False, exc.diagnostics
            return
        _READ = read
        try:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                pending = pool.imap(_parse_chunk, _chunks(files, workers * CHUNKS_PER_WORKER))
                if meanwhile is not None:
                    meanwhile()
                for chunk in pending:
                    yield from _unpack(chunk)
        finally:
            _READ = None

    return read_files


@dataclass
class LoadedFleet:
    files: FleetFiles
    # results of the workload documents checked while the files parsed (DocumentChecks.result)
    checked_early: Callable[[SourceDoc], CheckedDocument | None] | None = None


def load(source: str | os.PathLike[str], jobs: int | None = None, select: Callable[[str], bool] | None = None,
         keep: Callable[[SourceDoc], bool] | None = None) -> LoadedFleet:
    """Every document of the fleet, a large fleet's parsed by forked workers. Meanwhile this process
    imports the compiler (this module imports only the loader, so the parse starts at once), warms the
    caches the build workers will inherit and checks each workload document as it arrives."""
    early: list[Callable[[SourceDoc], CheckedDocument | None]] = []

    def read_along(clusters: list[SourceDoc]) -> Callable[[SourceDoc], None]:
        from .validate.documents import DocumentChecks

        warm_caches(clusters)
        checks = DocumentChecks()
        early.append(checks.result)
        return checks

    files = load_fleet(source, meanwhile=read_along, read_files=parallel_reader(jobs), select=select, keep=keep)
    return LoadedFleet(files, early[0] if early else None)


def warm_caches(clusters: list[SourceDoc]) -> None:
    """Build what every cluster build needs once, before the build workers are forked (this runs while
    the workload files parse): cel-python's parser and the built-in schemas of the Kubernetes versions
    the cluster files name. Each worker would otherwise spend 0.15 s on them. The cluster documents are
    not validated yet: only versions gpuc supports are warmed, anything else is validation's to report."""
    from .cel.engine import environment
    from .check.builtin import SchemasUnavailable, builtin_kinds
    from .check.model import value_at
    from .facts.platform import parse_kubernetes_version

    environment()
    for doc in clusters:
        version = value_at(doc.value, ("spec", "kubernetesVersion"))
        with contextlib.suppress(ValueError, SchemasUnavailable, OSError):
            if isinstance(version, str):
                builtin_kinds(parse_kubernetes_version(version).kubernetes)


# ----------------------------------------------------------------------------------------- building

class _Task(Generic[T, R]):
    def __init__(self, fn: Callable[[T], R]) -> None:
        self.fn = fn


_TASK: _Task | None = None  # set before forking; the workers inherit it


def _run_task(item: object) -> object:
    assert _TASK is not None
    return _TASK.fn(item)


def overlapped(background: Callable[[], T], foreground: Callable[[], R], parallel: bool) -> tuple[T, R]:
    """Both results; with `parallel` (and fork available) `background` runs in a forked process that
    inherits everything it needs while this process runs `foreground`. Its result comes back pickled,
    so it should be small (findings, not objects)."""
    global _TASK
    if not parallel or not can_fork():
        return background(), foreground()
    _TASK = _Task(lambda _: background())
    try:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            pending = pool.apply_async(_run_task, (None,))
            done = foreground()
            return pending.get(), done  # type: ignore[return-value]
    finally:
        _TASK = None


def build_workers(workloads: int, clusters: int, jobs: int | None) -> int:
    """Processes to build `clusters` clusters holding `workloads` workloads in all."""
    if jobs is not None:
        return max(1, jobs)
    if clusters < 2 or workloads < PARALLEL_MIN_WORKLOADS or not can_fork():
        return 1
    return min(clusters, cores())


@contextlib.contextmanager
def mapped(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[Iterator[R]]:
    """`fn` over `items`, in order: in this process, or in `workers` forked processes that inherit `fn`
    and everything it closes over. Work the caller does inside the scope overlaps the workers'; leaving
    the scope early terminates them, their results unread."""
    global _TASK
    if workers <= 1:
        yield map(fn, items)
        return
    _TASK = _Task(fn)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            yield pool.imap(_run_task, items, chunksize=1)  # type: ignore[arg-type]
    finally:
        _TASK = None
