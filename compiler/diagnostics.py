"""Findings about user input, and the one exception that carries them out of the pipeline.

Every finding names a file, a line and a field path, because a platform engineer reading CI output
must be able to jump to the mistake without reading gpuc's source.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePath
from typing import Literal

Severity = Literal["error", "warning", "note"]  # note: information a CI report shows (diff costs), never a finding
Path = tuple[str | int, ...]


def format_path(path: Sequence[str | int]) -> str:
    """`("spec", "gpu", "mig", "slices", 0, "profile")` -> `spec.gpu.mig.slices[0].profile`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


_PART = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")


@lru_cache(maxsize=4096)
def parse_path(text: str) -> Path:
    """`spec.gpu.mig.slices[0].profile` -> ("spec", "gpu", "mig", "slices", 0, "profile"); "" -> ().
    Cached: lowering records the same few paths for every object it builds."""
    out: list[str | int] = []
    for name, index in _PART.findall(text):
        if name:
            out.append(name)
        else:
            out.append("*" if index == "*" else int(index))
    return tuple(out)


_fleet_root: PurePath | None = None


def show_paths_from(fleet: str | os.PathLike[str] | None) -> None:
    """Diagnostics name fleet files relative to the fleet root (the same for every checkout); printed, they
    are relative to the working directory, so `gpuc validate intents` prints intents/clusters/... that opens."""
    global _fleet_root
    _fleet_root = PurePath(fleet) if fleet is not None else None


def _from_cwd(file: str) -> str:
    if _fleet_root is None or not file or os.path.isabs(file) or file.startswith(("(", "<")):
        return file
    path = _fleet_root / file
    if not os.path.lexists(path):
        return file  # not a fleet file: an export named from the working directory, ref:path of a diff base
    rel = os.path.relpath(path)
    shown = os.path.abspath(path) if rel.startswith(os.pardir + os.sep + os.pardir) else rel  # far away: absolute reads better
    return shown + ("/" if file.endswith("/") else "")  # a directory finding keeps its slash


@dataclass(frozen=True, order=True)
class Diagnostic:
    file: str
    line: int
    path: str
    message: str
    hint: str = ""
    severity: Severity = "error"
    code: str = ""  # a warning a Cluster's spec.acknowledge can accept
    rule: str = ""  # the kind of finding, by what found it (`schema`, `rules/budgets`, `output/objects`, `placement`): SARIF's rule

    @property
    def shown_file(self) -> str:
        """The file as the person (or CI annotator) at the shell opens it: relative to the working directory."""
        return _from_cwd(self.file)

    def render(self) -> str:
        file = self.shown_file
        where = f"{file}:{self.line}" if self.line else file
        text = f"{where}: {self.severity}: {self.path}: {self.message}" + (f" [{self.code}]" if self.code else "")
        if self.hint:
            text += "\n    hint: " + self.hint.replace("\n", "\n          ")
        return text

    def as_dict(self) -> dict:
        return {
            "file": self.shown_file,
            "line": self.line,
            "path": self.path,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            **({"code": self.code} if self.code else {}),
            **({"rule": self.rule} if self.rule else {}),
        }


@dataclass
class InputError(Exception):
    """Raised when input cannot be compiled; carries every finding, not just the first."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    # what the command says besides (the cache's notes): printed after the findings, which the reader needs first
    after: list[str] = field(default_factory=list)

    def __reduce__(self):  # keep the findings when raised in a worker process
        return (type(self), (self.diagnostics,))

    def __str__(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


class Findings:
    """Collects diagnostics across a stage so users see all their mistakes in one run."""

    def __init__(self) -> None:
        self._items: list[Diagnostic] = []

    def add(self, diagnostic: Diagnostic) -> None:
        self._items.append(diagnostic)

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self._items.extend(diagnostics)

    def __len__(self) -> int:
        return len(self._items)

    def tag_since(self, start: int, rule: str) -> None:
        """Name what found the findings added since `start` (those without a rule yet)."""
        self._items[start:] = tagged(self._items[start:], rule)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self._items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self._items if d.severity == "warning"]

    def redact(self, secrets: set[str]) -> None:
        """Never echo a credential back into logs or PR comments, whichever rule quoted it: also not
        lower-cased or turned into a name suggestion ('nvapi_Ab' -> 'nvapi-ab'), which keeps the key."""
        variants = {v for s in secrets for v in (s, re.sub(r"[^a-z0-9.-]+", "-", s.lower()).strip("-.")) if len(v) >= 8}
        pattern = re.compile("|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True)), re.IGNORECASE) if variants else None

        def clean(text: str) -> str:
            return pattern.sub("<redacted>", text) if pattern else text
        if secrets:
            self._items = [Diagnostic(d.file, d.line, clean(d.path), clean(d.message), clean(d.hint), d.severity, d.code, d.rule)
                           for d in self._items]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise InputError(sorted(set(self._items)))

    def all(self) -> list[Diagnostic]:
        return sorted(set(self._items))


def tagged(diagnostics: Iterable[Diagnostic], rule: str) -> list[Diagnostic]:
    """The findings, each without a rule given `rule` (Diagnostic.rule)."""
    return [d if d.rule else dataclasses.replace(d, rule=rule) for d in diagnostics]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A "did you mean 'x'?" suffix, or "" when nothing is close."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f"did you mean '{lowered[word.lower()]}'?"
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return ""


def one_of(choices: Iterable[str]) -> str:
    return ", ".join(f"'{c}'" for c in choices)


class InfeasibleError(InputError):
    """Valid input the clusters cannot satisfy (exit code 1 rather than 2)."""
