"""The tree gpuc rendered last time, read back so that updates can be judged (`oldSelf`).

In `gpuc render` that is what the output directory holds before it is replaced; in `gpuc validate`
the directory given with `--previous`. Only directories gpuc wrote (their kustomization.yaml carries
gpuc's marker) are read: anything else says nothing about what the cluster runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..diagnostics import Diagnostic, InputError
from ..emit.tree import is_gpuc_output
from .model import ObjectKey, object_key

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_previous(directory: Path) -> dict[ObjectKey, dict[str, Any]]:
    """Objects of one cluster's rendered directory by identity; {} when it is not a gpuc tree."""
    if not is_gpuc_output(directory):
        return {}
    objects: dict[ObjectKey, dict[str, Any]] = {}
    for path in sorted(directory.rglob("*.yaml")):
        try:
            docs = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            mark = getattr(exc, "problem_mark", None)
            raise InputError([Diagnostic(str(path), mark.line + 1 if mark else 0, "(previous tree)",
                                         f"cannot read the previously rendered file: {getattr(exc, 'problem', None) or exc}",
                                         "restore it from git, or remove the directory to render from scratch")]) from None
        for doc in docs:
            if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and doc["metadata"].get("name"):
                key = object_key(doc)
                if key is not None:
                    objects[key] = doc
    return objects
