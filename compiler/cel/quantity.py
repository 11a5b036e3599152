"""Kubernetes resource quantities with the semantics of the apiserver's CEL quantity library.

Device capacities (`device.capacity[domain].memory`) are Quantities in DRA CEL, and selectors compare
them with `compareTo(quantity('40Gi'))`. Values are kept exact (int or Fraction): "79.6Gi" against
"80Gi" must never be decided by floating-point rounding.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, int | Fraction] = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
# apimachinery's accepted grammar: <sign><digits>[.<digits>]<suffix>, suffix binary SI, decimal SI or e<exp>.
_PATTERN = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""), (-3, "m"), (-6, "u"), (-9, "n"))
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


def _exact(value: int | Fraction) -> int | Fraction:
    return int(value) if isinstance(value, Fraction) and value.denominator == 1 else value


class Quantity:
    """An exact quantity and the format (binary or decimal SI) it was written in.

    Equality and hashing follow the value, as Kubernetes' `Quantity.Equal` does: "1Gi" == "1073741824".
    There are deliberately no ordering operators: DRA CEL only orders quantities through
    compareTo/isGreaterThan/isLessThan, and `q < q2` must stay a "no such overload" error.
    """

    __slots__ = ("value", "format", "_text")

    def __init__(self, value: int | Fraction, format: str = DECIMAL_SI) -> None:
        self.value = _exact(value)
        self.format = format
        self._text: str | None = None

    @classmethod
    def parse(cls, text: str | int) -> Quantity:
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            raise QuantityError(f"expected a quantity string, got {type(text).__name__}")
        raw = str(text).strip()
        match = _PATTERN.match(raw)
        if not match:
            raise QuantityError(f"'{raw}' is not a Kubernetes quantity (a number with an optional suffix: Ki, Mi, Gi, ..., m, k, M, G, ... or e<n>)")
        number = Fraction(match.group(1))
        suffix = match.group(2) or ""
        if suffix in _BINARY:
            return cls(number * _BINARY[suffix], BINARY_SI)
        if suffix[:1] in ("e", "E") and len(suffix) > 1:  # an exponent; "E" alone is exa (10^18)
            return cls(number * Fraction(10) ** int(suffix[1:]), DECIMAL_SI)
        return cls(number * _DECIMAL[suffix], DECIMAL_SI)

    @classmethod
    def of_bytes(cls, n: int) -> Quantity:
        return cls(n, BINARY_SI)

    @classmethod
    def written(cls, text: str | int) -> Quantity:
        """A quantity a user wrote, which prints as written ("1.5Gi", not "1536Mi") wherever it is emitted."""
        quantity = cls.parse(text)
        quantity._text = str(text).strip()
        return quantity

    @property
    def bytes(self) -> int:
        """The amount as a whole number of base units (bytes for memory), rounded up as Kubernetes does."""
        return -((-self.value) // 1) if isinstance(self.value, Fraction) else self.value

    @property
    def text(self) -> str:
        return str(self)

    # ------------------------------------------------------------------ arithmetic, comparison
    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def add(self, other: Quantity | int) -> Quantity:
        return Quantity(self.value + (other.value if isinstance(other, Quantity) else other), self.format)

    def sub(self, other: Quantity | int) -> Quantity:
        return Quantity(self.value - (other.value if isinstance(other, Quantity) else other), self.format)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_integer(self) -> bool:
        return isinstance(self.value, int) and INT64_MIN <= self.value <= INT64_MAX

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value == other.value

    def __hash__(self) -> int:
        return hash(("quantity", self.value))

    # ------------------------------------------------------------------ text
    def __str__(self) -> str:
        if self._text is None:
            self._text = canonical(self.value, self.format)
        return self._text

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def canonical(value: int | Fraction, format: str) -> str:
    """The canonical text Kubernetes writes: 85520809984 bytes -> "81559Mi", 1500 -> "1500", 0.5 -> "500m"."""
    if format == BINARY_SI and isinstance(value, int) and abs(value) >= 1024:
        exponent = 0
        while exponent < len(_BINARY_SUFFIXES) - 1 and value % 1024 == 0:
            value //= 1024
            exponent += 1
        return f"{value}{_BINARY_SUFFIXES[exponent]}"
    for power, suffix in _DECIMAL_SUFFIXES:
        scaled = Fraction(value) / Fraction(10) ** power
        if scaled.denominator == 1 and (power <= 0 or abs(scaled) >= 1):
            return f"{int(scaled)}{suffix}"
    nanos = -((-Fraction(value) * 10**9) // 1)  # Kubernetes rounds sub-nano values up
    return f"{nanos}n"


def parse_quantity(text: str | int) -> Quantity:
    return Quantity.parse(text)
