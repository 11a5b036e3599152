"""A list-typed device attribute value (KEP-5491, DRAListTypeAttributes): `ints`, `bools`, `strings` or
`versions` in a ResourceSlice. Kept with its wire kind, so an empty list still knows what it is and is
written back as it was read; CEL sees the elements as a list, constraints as a set (allocator/search.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple

LIST_KINDS = {"ints": "int", "bools": "bool", "strings": "string", "versions": "version"}  # list kind -> element kind


class AttrList(NamedTuple):
    kind: str  # one of LIST_KINDS
    items: tuple[Any, ...]  # int, bool, str or Semver, as the scalar of the same kind
