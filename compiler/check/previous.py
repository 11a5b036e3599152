"""The tree gpuc rendered last time, read back so that updates can be judged (`oldSelf`).

In `gpuc render` that is what the output directory holds before it is replaced; in `gpuc validate`
the directory given with `--previous`. Only directories gpuc wrote (their kustomization.yaml carries
gpuc's marker) are read: anything else says nothing about what the cluster runs.

Reading is lazy and cheap: an object's previous file is found by its file name, and when its bytes
equal what gpuc is about to write, the object did not change and is not parsed at all. A render of
tens of thousands of objects therefore parses only the few that changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..diagnostics import Diagnostic, InputError
from ..emit.staging import is_gpuc_output
from ..emit.tree import object_filename
from ..emit.yaml_out import dump_manifest
from ..lower.graph import KubeObject
from .model import ObjectKey, object_key

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
UNCHANGED = object()  # the previous file holds exactly the object about to be written


class PreviousTree:
    """One cluster's previously rendered directory."""

    def __init__(self, directory: Path | None, unchanged: set[str] | None = None) -> None:
        self.directory = directory
        self.unchanged = unchanged or set()  # files already known to be byte-identical
        self.names: set[str] = set()
        if directory is not None and is_gpuc_output(directory):
            self.names = {p.name for p in directory.iterdir() if p.suffix == ".yaml"}

    def old_version(self, obj: KubeObject, new_text: str | None = None) -> Any:
        """The previous manifest of `obj`, UNCHANGED when it is byte-identical, or None when it did not exist."""
        name = object_filename(obj)
        if name in self.unchanged:
            return UNCHANGED
        if name not in self.names:
            return None
        path = self.directory / name  # type: ignore[operator]
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise _unreadable(path, exc) from None
        if raw == (new_text if new_text is not None else dump_manifest(obj.manifest)).encode("utf-8"):
            return UNCHANGED
        try:
            docs = [d for d in yaml.load_all(raw.decode("utf-8"), Loader=_Loader) if d is not None]
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise _unreadable(path, exc) from None
        old = docs[0] if len(docs) == 1 and isinstance(docs[0], dict) else None
        return old if old is not None and object_key(old) == object_key(obj.manifest) else None


def _unreadable(path: Path, exc: Exception) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    return InputError([Diagnostic(str(path), mark.line + 1 if mark else 0, "(previous tree)",
                                  f"cannot read the previously rendered file: {getattr(exc, 'problem', None) or exc}",
                                  "restore it from git, or remove the directory to render from scratch")])


def read_previous(directory: Path) -> dict[ObjectKey, dict[str, Any]]:
    """Every object of a previous directory by identity (for callers that want them all at once)."""
    tree = PreviousTree(directory)
    objects: dict[ObjectKey, dict[str, Any]] = {}
    for name in sorted(tree.names):
        path = directory / name
        try:
            docs = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise _unreadable(path, exc) from None
        for doc in docs:
            if isinstance(doc, dict) and (key := object_key(doc)) is not None and key[3]:
                objects[key] = doc
    return objects
