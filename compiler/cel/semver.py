"""Semantic versions as DRA CEL sees version attributes (blang/semver, Kubernetes' semver library).

Version attributes (`driverVersion`, `cudaComputeCapability`) are semver values in CEL, so
"9.0.0" < "10.0.0" holds, where a string comparison would say otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_STRICT = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    rf"(?:-({_IDENT}(?:\.{_IDENT})*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_LOOSE_CORE = re.compile(r"^v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?(.*)$")


class SemverError(ValueError):
    """Text that is not a semantic version."""


@dataclass(frozen=True, eq=False, slots=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        """Strict semver 2.0.0; with `normalize`, "v1.2" and "01.2.3" are accepted as Kubernetes' semver(s, true) does."""
        if not isinstance(text, str):
            raise SemverError(f"expected a version string, got {type(text).__name__}")
        if normalize:
            text = _normalize(text)
        match = _STRICT.match(text)
        if not match:
            raise SemverError(f"'{text}' is not a semantic version (MAJOR.MINOR.PATCH, e.g. \"1.2.3\")")
        major, minor, patch, pre, build = match.groups()
        return cls(int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else (), tuple(build.split(".")) if build else ())

    def compare(self, other: Semver) -> int:
        a, b = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        return _compare_pre(self.pre, other.pre)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(("semver", self.major, self.minor, self.patch, self.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _normalize(text: str) -> str:
    match = _LOOSE_CORE.match(text.strip())
    if not match:
        return text
    parts = [str(int(p)) if p is not None else "0" for p in match.groups()[:3]]
    return ".".join(parts) + match.group(4)


def _compare_pre(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    if a == b:
        return 0
    if not a:
        return 1  # a release is greater than any of its pre-releases
    if not b:
        return -1
    for x, y in zip(a, b):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:
            return -1 if xn else 1  # numeric identifiers sort before alphanumeric ones
        return -1 if x < y else 1
    return -1 if len(a) < len(b) else 1
