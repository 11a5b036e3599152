"""Value types users write in intents: Kubernetes quantities, model sizes, DNS names.

Each parses strictly and fails with a message that shows the accepted form, because "40GiB" or
"-1Gi" are the realistic mistakes and Kubernetes itself would only reject them at apply time.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from ..cel.quantity import Quantity, QuantityError

_QUANTITY = re.compile(r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"


def quantity_value(raw: Any) -> int | Fraction | None:
    """The amount of any Kubernetes quantity (zero and negative ones too, as the API accepts), or None."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return None
    try:
        return Quantity.parse(raw if isinstance(raw, (str, int)) else repr(raw)).value
    except QuantityError:
        return None


def parse_quantity(raw: Any) -> Quantity:
    """A quantity an intent gives: positive, printed as written (compiler.cel.quantity.Quantity.written)."""
    if isinstance(raw, Quantity):
        return raw
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise ValueError(f"expected a quantity such as \"40Gi\", got {type(raw).__name__}")
    text = str(raw).strip()
    if not _QUANTITY.fullmatch(text):
        fix = re.sub(r"([KMGTPE])i?B$", r"\1i", text)
        hint = f"; did you mean \"{fix}\"?" if fix != text and _QUANTITY.fullmatch(fix) else ""
        raise ValueError(f"'{text}' is not a Kubernetes quantity (use a number with Ki, Mi, Gi, Ti or k, M, G, e.g. \"40Gi\"){hint}")
    quantity = Quantity.written(text)
    if quantity.sign() <= 0:
        raise ValueError(f"'{text}' must be greater than zero")
    return quantity


def parse_memory(raw: Any) -> Quantity:
    """A memory amount: a quantity with a unit. "40" is 40 bytes to Kubernetes and matches every GPU,
    which is never what the author meant."""
    quantity = parse_quantity(raw)
    text = str(raw).strip()
    if not re.search(r"[A-Za-z]", text):
        raise ValueError(f"'{text}' has no unit, so it means {text} bytes; did you mean \"{text}Gi\"?")
    return quantity


MemoryField = Annotated[
    Quantity,
    PlainValidator(parse_memory),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": QUANTITY_PATTERN.replace(")?$", ")$"), "examples": ["40Gi"]}),
]

QuantityField = Annotated[
    Quantity,
    PlainValidator(parse_quantity),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": QUANTITY_PATTERN, "examples": ["40Gi"]}),
]

_PARAMS = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[KkMmBbTt]?)$")
_UNITS = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_parameters(raw: Any) -> float:
    """Model size: "8B", "1.5B", "405B", or a plain number of parameters."""
    if isinstance(raw, bool):
        raise ValueError("expected a model size such as \"8B\"")
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str) and (m := _PARAMS.fullmatch(raw.strip())):
        value = float(m.group("num")) * _UNITS[m.group("unit").lower()]
    else:
        raise ValueError(f"'{raw}' is not a model size (write e.g. 8B, 70B, 1.5B or a plain number of parameters)")
    if not 1e6 <= value <= 1e13:
        raise ValueError(f"{raw} parameters is outside 1M..10T; write the size as e.g. \"8B\"")
    return value


ParameterCount = Annotated[
    float,
    PlainValidator(parse_parameters),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": r"^\d+(\.\d+)?[KMBT]?$"}, {"type": "number"}],
                    "examples": ["8B", "70B"]}),
]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _dns(pattern: re.Pattern[str], what: str):
    def check(raw: Any) -> str:
        if isinstance(raw, bool):
            raise ValueError(f"expected a {what} string, got {str(raw).lower()}: YAML reads yes/no, on/off and true/false "
                             "as booleans, so quote the name")
        if not isinstance(raw, str):
            raise ValueError(f"expected a {what} string, got {raw!r}")
        if not pattern.fullmatch(raw):
            suggestion = re.sub(r"[^a-z0-9.-]+", "-", raw.lower()).strip("-.")
            hint = f"; e.g. '{suggestion}'" if suggestion and pattern.fullmatch(suggestion) else ""
            raise ValueError(f"'{raw}' is not a valid {what} (lower-case letters, digits and '-', "
                             f"starting and ending with a letter or digit){hint}")
        return raw
    return check


DnsLabel = Annotated[str, PlainValidator(_dns(DNS_LABEL, "DNS label")),
                     WithJsonSchema({"type": "string", "pattern": DNS_LABEL.pattern, "maxLength": 63})]
DnsSubdomain = Annotated[str, PlainValidator(_dns(DNS_SUBDOMAIN, "DNS subdomain name")),
                         WithJsonSchema({"type": "string", "pattern": DNS_SUBDOMAIN.pattern, "maxLength": 253})]

_SEMVERISH = re.compile(r"^\d+(\.\d+){0,2}$")


def normalize_version(raw: Any) -> str:
    """"8.0" -> "8.0.0"; the DRA CEL semver() needs three parts."""
    if isinstance(raw, float):  # YAML has already turned 550.90 into 550.9: what was written is lost
        raise ValueError(f"a version must be quoted: YAML reads {raw} as a number, which drops trailing zeros (write \"{raw}\" "
                         "as you mean it, e.g. \"550.90\")")
    text = str(raw).strip() if isinstance(raw, (str, int)) and not isinstance(raw, bool) else None
    if text is None or not _SEMVERISH.fullmatch(text):
        raise ValueError(f"'{raw}' is not a version like \"8.0\" or \"550.54.15\"")
    parts = [str(int(p)) for p in text.split(".")]
    return ".".join(parts + ["0"] * (3 - len(parts)))


Version = Annotated[str, PlainValidator(normalize_version),
                    WithJsonSchema({"type": "string", "pattern": _SEMVERISH.pattern})]
