"""The cache on disk: JSON only (a cache restored by CI must never run code), each file checked before use.

    <dir>/gpuc-cache-2/index-<fleet>.json    the fleet's files as last built: path -> digest and documents
    <dir>/gpuc-cache-2/<cluster>-<key>.json  one cluster's build: its warnings, counts and rendered files' digests

An entry holds no rendered file: a hit is taken only when the output directory still holds exactly the
files the entry describes (same digests), and those are hard-linked into the new tree. Anything that does
not parse, names another format or key, or fails its checksum is ignored with a note, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic
from .keys import DocRef, digest

FORMAT = "gpuc-cache-2"  # 2: documents carry their position and a digest of their lines
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
        body = {"format": FORMAT, "cluster": self.cluster, "key": self.key, "counts": self.counts, "files": self.files,
                "stamps": self.stamps,
                "warnings": [[d.file, d.line, d.path, d.message, d.hint, d.severity, d.code] for d in self.warnings]}
        return {**body, "checksum": digest(json.dumps(body, sort_keys=True).encode())}

    @classmethod
    def from_json(cls, raw: Any, key: str) -> Entry:
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError("written by another gpuc cache format")
        body = {k: v for k, v in raw.items() if k != "checksum"}
        if raw.get("checksum") != digest(json.dumps(body, sort_keys=True).encode()):
            raise ValueError("checksum mismatch (a damaged or edited file)")
        if raw.get("key") != key:
            raise ValueError("key mismatch")
        warnings = [Diagnostic(str(f), int(line), str(path), str(m), str(h), "error" if sev == "error" else "warning", str(code))
                    for f, line, path, m, h, sev, code in raw["warnings"]]
        counts = {str(k): int(v) for k, v in raw["counts"].items()}
        files = {str(k): str(v) for k, v in raw["files"].items()}
        stamps = {str(k): [int(v[0]), int(v[1])] for k, v in raw["stamps"].items()}
        return cls(str(raw["cluster"]), key, warnings, counts, files, stamps)


@dataclass
class Index:
    files: dict[str, tuple[str, list[DocRef]]] = field(default_factory=dict)  # fleet path -> (digest, documents)

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "files": {p: [d, [r.as_list() for r in refs]] for p, (d, refs) in sorted(self.files.items())}}

    @classmethod
    def from_json(cls, raw: Any) -> Index:
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("files"), dict):
            raise ValueError("written by another gpuc cache format")
        return cls({str(p): (str(d), [DocRef.from_list(r) for r in refs]) for p, (d, refs) in raw["files"].items()})


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
        except (OSError, ValueError, TypeError, KeyError) as exc:
            self.notes.append(f"cache index {path} ignored: {exc}")
            return Index()

    def save_index(self, fleet: Path, index: Index) -> None:
        self._write(self.directory / f"index-{digest(str(fleet.resolve()).encode())}.json", index.as_json())

    def entry(self, cluster: str, key: str) -> Entry | None:
        path = self.directory / f"{cluster}-{key}.json"
        if not path.exists():
            return None
        try:
            return Entry.from_json(self._read(path), key)
        except (OSError, ValueError, TypeError, KeyError) as exc:
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
