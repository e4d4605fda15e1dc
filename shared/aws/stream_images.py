"""DynamoDB-typed values ({"S": ...}, {"N": ...}, ...) of a stream record's image, as Python values.

The same values as boto3's `TypeDeserializer` (numbers as Decimal in DynamoDB's context, sets as sets;
binaries as bytes, where boto3 wraps them in a `Binary` equal to them): importing boto3 for it would cost
the cold starts of notify and submit ~30 ms of CPU.
"""

from __future__ import annotations

import decimal
from typing import Any

# DynamoDB's numbers: 38 significant digits, exponents -130..125, any inexactness an error (as boto3's)
_NUMBERS = decimal.Context(
    Emin=-128,
    Emax=126,
    prec=38,
    traps=[decimal.Clamped, decimal.Overflow, decimal.Inexact, decimal.Rounded, decimal.Underflow],
)


def plain_value(value: dict[str, Any]) -> Any:
    """One typed value; TypeError for an empty or unknown one."""
    if not isinstance(value, dict) or len(value) != 1:
        raise TypeError(f"not a DynamoDB-typed value: {value!r}")
    [(kind, inner)] = value.items()
    if kind in ("S", "BOOL"):
        return inner
    if kind == "B":
        return _binary(inner)
    if kind == "NULL":
        return None
    if kind == "N":
        return _NUMBERS.create_decimal(inner)
    if kind == "SS":
        return set(inner)
    if kind == "BS":
        return {_binary(b) for b in inner}
    if kind == "NS":
        return {_NUMBERS.create_decimal(n) for n in inner}
    if kind == "L":
        return [plain_value(v) for v in inner]
    if kind == "M":
        return {k: plain_value(v) for k, v in inner.items()}
    raise TypeError(f"DynamoDB type {kind} is not supported")


def _binary(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray)):  # a JSON event's base64 text: boto3 refuses it too
        raise TypeError(f"a binary must be bytes, not {type(value).__name__}")
    return bytes(value)


def plain_image(image: dict[str, Any]) -> dict[str, Any]:
    """A stream record's NewImage/OldImage as plain values."""
    return {name: plain_value(value) for name, value in image.items()}
