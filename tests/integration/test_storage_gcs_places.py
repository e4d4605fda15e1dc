"""GCS as a store for data gravity and checkpoint expiry, against the gcp-storage-emulator (started by
tests/fakes/store_fixtures.py): a bucket's location and listed size under a prefix, and its lifecycle."""

from __future__ import annotations

import uuid

import pytest

from shared.storage.bucket_places import Locatable
from shared.storage.gcs import GCSBackend

pytest_plugins = ["fakes.store_fixtures"]


class StaticToken:
    def token(self) -> str:
        return "control-plane-token"


def _backend(endpoint: str) -> GCSBackend:
    return GCSBackend(StaticToken(), project="p", endpoint_url=endpoint)


def test_a_gcs_bucket_says_where_it_lives_and_what_its_prefix_holds(gcs_emulator: str):
    backend = _backend(gcs_emulator)
    bucket = f"data-{uuid.uuid4().hex[:10]}"
    client = backend.client()
    made = client.bucket(bucket)
    client.create_bucket(made)  # the emulator places every bucket in the multi-region US, whatever is asked
    for i in range(3):
        made.blob(f"train/part-{i}").upload_from_string(b"x" * 1000)
    made.blob("other/big").upload_from_string(b"y" * 50_000)

    assert isinstance(backend, Locatable)
    assert backend.region_of(bucket) == "us"  # GCS's `location`, lowercased: a multi-region here
    assert backend.listed_gb(bucket, "train") == (pytest.approx(3000 / 1e9), True)
    assert backend.listed_gb(bucket, "train", max_objects=2) == (pytest.approx(2000 / 1e9), False)


def test_a_gcs_bucket_takes_an_expiry_rule(gcs_emulator: str):
    backend = _backend(gcs_emulator)
    bucket = f"ckpt-{uuid.uuid4().hex[:10]}"
    backend.create(bucket)

    backend.set_expiry(bucket, 7)
    backend.set_expiry(bucket, 7)  # the next launch sets it again

    rules = list(backend.client().get_bucket(bucket).lifecycle_rules)
    assert [(r["action"]["type"], r["condition"]["age"]) for r in rules] == [("Delete", 7)]
