"""The cache on disk: JSON only (a cache restored by CI must never run code), each file checked before use.

    <dir>/gpuc-cache-3/index-<fleet>.json    the fleet's files as last built: path -> digest and documents
    <dir>/gpuc-cache-3/<cluster>-<key>.json  one cluster's build: its warnings, counts and rendered files' digests

An entry holds no rendered file: a hit is taken only when the output directory still holds exactly the
files the entry describes (same digests), and those are hard-linked into the new tree. Anything that does
not parse, names another format or key, or fails its checksum is ignored with a note, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic
from .keys import DocRef, digest

FORMAT = "gpuc-cache-3"  # 2: documents carry their position and a digest of their lines; 3: the index has a checksum
KEEP_PER_CLUSTER = 3  # entries kept per cluster name (the newest): a branch switch back and forth stays warm


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuc"


@dataclass
class Entry:
    cluster: str
    key: str
    warnings: list[Diagnostic]
    counts: dict[str, int]  # objects, releases, applications, checked, unplaced
    files: dict[str, str]  # rendered path -> digest of its bytes
    # rendered path -> [size, mtime_ns] as last seen on disk: when they still match, the files are not read
    # again (a git checkout of the tree changes them, and then the digests decide)
    stamps: dict[str, list[int]] = field(default_factory=dict)
    restamped: bool = False  # the stamps changed in this run (the files were read and matched): save again

    def as_json(self) -> dict[str, Any]:
        return _sealed({"format": FORMAT, "cluster": self.cluster, "key": self.key, "counts": self.counts, "files": self.files,
                        "stamps": self.stamps,
                        "warnings": [[d.file, d.line, d.path, d.message, d.hint, d.severity, d.code, d.rule] for d in self.warnings]})

    @classmethod
    def from_json(cls, raw: Any, cluster: str, key: str) -> Entry:
        """The entry `raw` holds, if it is one a build of `cluster` with `key` could have written; else ValueError."""
        body = _unsealed(raw)
        if body.get("key") != key or body.get("cluster") != cluster:
            raise ValueError("key mismatch")
        counts, files, stamps, warnings = body.get("counts"), body.get("files"), body.get("stamps"), body.get("warnings")
        if not (isinstance(counts, dict) and counts.keys() == set(COUNTS)
                and all(type(v) is int and v >= 0 for v in counts.values())):
            raise ValueError("impossible counts")
        if not (isinstance(files, dict) and files and all(_rendered_path(p) and _is_digest(d) for p, d in files.items())):
            raise ValueError("impossible file list")
        if not (isinstance(stamps, dict) and stamps.keys() <= files.keys() and all(map(_is_stamp, stamps.values()))):
            raise ValueError("impossible file stamps")
        if not (isinstance(warnings, list) and all(_is_warning(w) for w in warnings)):
            raise ValueError("impossible warnings")
        return cls(cluster, key, [Diagnostic(*w) for w in warnings], dict(counts), dict(files), {k: list(v) for k, v in stamps.items()})


COUNTS = ("objects", "releases", "applications", "checked", "unplaced")


def _sealed(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "checksum": digest(json.dumps(body, sort_keys=True).encode())}


def _unsealed(raw: Any) -> dict[str, Any]:
    """A cache file's body, once its format and checksum hold (a damaged or hand-edited file never does)."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError("written by another gpuc cache format")
    body = {k: v for k, v in raw.items() if k != "checksum"}
    if raw.get("checksum") != digest(json.dumps(body, sort_keys=True).encode()):
        raise ValueError("checksum mismatch (a damaged or edited file)")
    return body


# An entry holds a digest and a stamp for each of a cluster's ~1,500 files, checked on every warm render:
# these tests run in C (a loop over characters in Python was a fifth of a no-change render's CPU).
_DIGEST = re.compile(r"[0-9a-f]{32}")


def _is_digest(value: Any) -> bool:
    return type(value) is str and _DIGEST.fullmatch(value) is not None


def _rendered_path(value: Any) -> bool:
    """A path a render writes: relative, in plain segments (none empty, `.` or `..`)."""
    if type(value) is not str or "\\" in value:
        return False
    framed = f"/{value}/"
    return "//" not in framed and "/./" not in framed and "/../" not in framed


def _is_stamp(value: Any) -> bool:
    """[size, mtime_ns]."""
    return type(value) is list and len(value) == 2 and type(value[0]) is int and type(value[1]) is int \
        and value[0] >= 0 and value[1] >= 0


def _is_warning(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 8 and type(value[1]) is int and value[5] == "warning"
            and all(isinstance(v, str) for i, v in enumerate(value) if i != 1))


@dataclass
class Index:
    files: dict[str, tuple[str, list[DocRef]]] = field(default_factory=dict)  # fleet path -> (digest, documents)

    def as_json(self) -> dict[str, Any]:
        return _sealed({"format": FORMAT,
                        "files": {p: [d, [r.as_list() for r in refs]] for p, (d, refs) in sorted(self.files.items())}})

    @classmethod
    def from_json(cls, raw: Any) -> Index:
        """The index `raw` holds; ValueError when it is damaged or edited: an index decides which files a build
        reads, so it is sealed like an entry."""
        files = _unsealed(raw).get("files")
        if not isinstance(files, dict):
            raise ValueError("impossible file list")
        out = {}
        for p, item in files.items():
            if not (isinstance(item, list) and len(item) == 2 and _is_digest(item[0]) and isinstance(item[1], list)):
                raise ValueError("impossible file record")
            out[str(p)] = (item[0], [DocRef.from_list(r) for r in item[1]])
        return cls(out)


# what reading a cache file can raise: JSON nested past the recursion limit is a miss like any damage
UNREADABLE = (OSError, ValueError, TypeError, KeyError, RecursionError)


class CacheStore:
    """One cache directory. Every problem reading it is a note and a miss; writing it never fails a build."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / FORMAT
        self.notes: list[str] = []

    def _read(self, path: Path) -> Any:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)

    def index(self, fleet: Path) -> Index:
        path = self.directory / f"index-{digest(str(fleet.resolve()).encode())}.json"
        if not path.exists():
            return Index()
        try:
            return Index.from_json(self._read(path))
        except UNREADABLE as exc:
            self.notes.append(f"cache index {path} ignored: {exc}")
            return Index()

    def save_index(self, fleet: Path, index: Index) -> None:
        self._write(self.directory / f"index-{digest(str(fleet.resolve()).encode())}.json", index.as_json())

    def entry(self, cluster: str, key: str) -> Entry | None:
        path = self.directory / f"{cluster}-{key}.json"
        if not path.exists():
            return None
        try:
            return Entry.from_json(self._read(path), cluster, key)
        except UNREADABLE as exc:
            self.notes.append(f"cache entry {path.name} ignored: {exc}")
            return None

    def save(self, entry: Entry) -> None:
        self._write(self.directory / f"{entry.cluster}-{entry.key}.json", entry.as_json())
        olds = sorted(self.directory.glob(f"{entry.cluster}-*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in olds[KEEP_PER_CLUSTER:]:
            with contextlib.suppress(OSError):
                old.unlink()

    def _write(self, path: Path, value: Any) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(value, separators=(",", ":")))  # one write: json.dump writes per token
            os.replace(tmp, path)
        except OSError as exc:
            self.notes.append(f"cannot write the cache in {self.directory}: {exc.strerror or exc}")
