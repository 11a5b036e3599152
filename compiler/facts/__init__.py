"""Data tables gpuc compiles against: GPU catalog and MIG geometry, DRA driver releases, chart keys,
Kubernetes API facts, operator facts, model shapes. The tables live in `data/*.yaml`; the modules
here only give them types, so that a new GPU or driver release is a data change, not a code change.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml reads the tables ten times faster


class VersionError(ValueError):
    """A version gpuc does not support, with the range it does and what to do (`hint`)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@cache
def load_table(name: str) -> Any:
    text = resources.files(__package__).joinpath("data", f"{name}.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=_Loader)  # a safe loader: plain data only
