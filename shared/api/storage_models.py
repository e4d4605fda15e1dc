"""API bodies of `GET /storage` and `DELETE /storage/{name}` (`skyless storage ls | delete`)."""

from __future__ import annotations

from pydantic import Field

from shared.api.deferred_model import DeferredModel


class BucketView(DeferredModel):
    name: str
    store: str = Field(description="s3, r2, gcs or azure.")
    url: str
    created_by: str | None = Field(None, description="The job that made it; None: skyless did not make it.")
    persistent: bool
    created_at: float = Field(0.0, description="Epoch seconds skyless first recorded it.")


class BucketList(DeferredModel):
    buckets: list[BucketView]
