"""Parse a large fleet's files on every core.

libyaml is the largest serial cost of loading a large fleet: 1 s for 20,000 workloads (5.5 MB),
all of it before the first cluster can be built. Files are independent, so above PARALLEL_MIN_BYTES
forked workers parse them in chunks and send back plain values, marshalled (a sixth of pickle's cost:
parsed YAML is only dicts, lists, strings and numbers). The parent is free meanwhile: the caller may
hand it other work (`meanwhile`), such as warming caches that the build workers, forked later,
inherit. Results come back in file order.
"""

from __future__ import annotations

import marshal
import multiprocessing
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..diagnostics import Diagnostic, InputError
from .yaml_source import SourceDoc

PARALLEL_MIN_BYTES = 1 << 20  # below this a fork costs more than it saves
CHUNKS_PER_WORKER = 4  # uneven files still balance across the workers

Read = Callable[[Path, str], list[SourceDoc]]
Parsed = list[SourceDoc] | list[Diagnostic]  # a file's documents, or why it could not be read


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    """Workers here are forked: they inherit what the parent built instead of being sent it."""
    return "fork" in multiprocessing.get_all_start_methods()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the read reports it


_READ: Read | None = None  # set before forking; the workers inherit it


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


def read_files(files: list[tuple[Path, str]], read: Read, meanwhile: Callable[[], None] | None = None,
               jobs: int | None = None) -> Iterator[tuple[bool, Parsed]]:
    """(True, documents) or (False, diagnostics) for each of `files` ((path, display name)), in order.

    `read` parses one file (raising InputError); it runs in forked workers (`jobs`, default one per
    core) when the files are large, and `meanwhile` then runs in this process while they parse.
    """
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
