"""The tree gpuc rendered last time, read back so that updates can be judged (`oldSelf`).

In `gpuc render` that is what the output directory holds before it is replaced; in `gpuc validate`
the directory given with `--previous`. Only directories gpuc wrote (their kustomization.yaml carries
gpuc's marker) are read: anything else says nothing about what the cluster runs.

Reading is lazy and cheap: an object's previous file is found by its file name, and when its bytes
equal what gpuc is about to write, the object did not change and is not parsed at all. A render of
tens of thousands of objects therefore parses only the few that changed. This implements the check
stage's `PreviousObjects`: the file layout is emit's business, so the reading lives here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..check.model import UNCHANGED, OldVersion, object_key
from ..diagnostics import Diagnostic, InputError
from ..lower.graph import KubeObject
from .staging import is_gpuc_output, unchanged_files
from .tree import object_filename
from .yaml_out import dump_manifest

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class PreviousTree:
    """One cluster's previously rendered directory, next to the files about to replace it."""

    def __init__(self, directory: Path, files: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.files = files or {}  # relative path -> the text about to be written
        self.names: set[str] = set()
        self.unchanged: set[str] = set()  # files byte-identical to what is about to be written
        if is_gpuc_output(directory):
            self.names = {p.relative_to(directory).as_posix() for p in directory.rglob("*.yaml") if p.is_file()}
            self.unchanged = unchanged_files(directory, self.files)

    def old_version(self, obj: KubeObject) -> OldVersion:
        name = object_filename(obj)
        if name in self.unchanged:
            return UNCHANGED
        if name not in self.names:
            return None
        path = self.directory / name
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise _unreadable(path, exc) from None
        if raw == (self.files.get(name) or dump_manifest(obj.manifest)).encode("utf-8"):
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
