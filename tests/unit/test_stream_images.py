"""Stream images read without boto3 give what boto3's TypeDeserializer gives, errors included."""

from __future__ import annotations

import decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from shared.aws.stream_images import plain_image, plain_value

IMAGE: dict[str, Any] = {
    "job_id": {"S": "job-0123456789ab"},
    "at": {"S": "2026-11-27T21:00:00+00:00"},
    "attempt": {"N": "3"},
    "cost": {"N": "0.000047123456789012345678901234567891"},
    "big": {"N": "-1.5E+100"},
    "done": {"BOOL": True},
    "message": {"NULL": True},
    "blob": {"B": b"\x00\x01"},
    "blobs": {"BS": [b"a", b"b"]},
    "tags": {"SS": ["x", "y"]},
    "counts": {"NS": ["1", "2.5"]},
    "facts": {"M": {"zone": {"S": "us-east-1a"}, "nodes": {"L": [{"N": "1"}, {"M": {}}, {"L": []}]}}},
}


def test_an_image_reads_as_boto3_reads_it() -> None:
    boto3s = {name: TypeDeserializer().deserialize(value) for name, value in IMAGE.items()}
    mine = plain_image(IMAGE)
    assert mine == boto3s
    assert isinstance(mine["attempt"], decimal.Decimal) and isinstance(mine["blob"], bytes)


@pytest.mark.parametrize(
    "value",
    [{}, {"X": "1"}, {"B": "AAE="}, {"BS": ["AAE="]}, {"N": "1" * 39}, {"N": "1E+200"}, {"L": [{}]}],
)
def test_what_boto3_refuses_is_refused_with_the_same_kind_of_error(value: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ArithmeticError)) as boto3s:
        TypeDeserializer().deserialize(value)
    with pytest.raises(boto3s.type):
        plain_value(value)
