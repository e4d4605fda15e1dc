"""The orphan reaper's marks (shared/jobs/reaper.py): one per cluster a sweep saw that no live job owns,
kept in the events table under the partition `reaper-marks` (`at` = `mark#<provider>#<cluster id>`).
The `ReaperMarks` port and its DynamoDB adapter; `shared.store.memory_records.MemoryReaperMarks` keeps
the same conditions in memory, and tests/unit/test_reaper_marks_contract.py holds both to one contract.
"""

from __future__ import annotations

import contextlib
from functools import cache
from typing import Protocol

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, PutError, UpdateError
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

MARKS_PARTITION = "reaper-marks"


class ReaperMark(Model):
    """One cluster seen unowned: since when, and whether it has been killed."""

    class Meta:
        table_name = "unbound-events"

    job_id = UnicodeAttribute(hash_key=True)  # always MARKS_PARTITION
    at = UnicodeAttribute(range_key=True)  # "mark#<provider>#<cluster id>"
    first_seen = NumberAttribute()
    state = UnicodeAttribute()  # "suspect" | "killed"
    owner_job = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)

    @property
    def cluster_id(self) -> str:
        return self.at.split("#", 2)[2]


def mark_key(provider: str, cluster_id: str) -> str:
    return f"mark#{provider}#{cluster_id}"


class ReaperMarks(Protocol):
    def of_provider(self, provider: str) -> dict[str, ReaperMark]:
        """The provider's marks by cluster id, read consistently."""
        ...

    def mark(self, provider: str, cluster_id: str, *, now: float, job_id: str, reason: str) -> ReaperMark:
        """Mark the cluster suspect as first seen `now`, unless it is marked already: then the mark there (its
        first sighting is kept)."""
        ...

    def claim_kill(self, mark: ReaperMark) -> bool:
        """Move the mark from "suspect" to "killed"; True for the one caller that moved it."""
        ...

    def forget(self, provider: str, cluster_id: str) -> None:
        """Delete the mark (none there: nothing)."""
        ...


@cache
def marks_model(settings: Settings) -> type[ReaperMark]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("events"),
            "region": settings.region,
            "host": settings.endpoint_url,
        },
    )
    return with_shared_session(type(f"ReaperMark_{settings.prefix}", (ReaperMark,), {"Meta": meta}))


class DynamoReaperMarks:
    def __init__(self, settings: Settings) -> None:
        self.model = marks_model(settings)

    def of_provider(self, provider: str) -> dict[str, ReaperMark]:
        prefix = mark_key(provider, "")
        found = self.model.query(MARKS_PARTITION, self.model.at.startswith(prefix), consistent_read=True)
        return {mark.cluster_id: mark for mark in found}

    def mark(self, provider: str, cluster_id: str, *, now: float, job_id: str, reason: str) -> ReaperMark:
        key = mark_key(provider, cluster_id)
        mark = self.model(MARKS_PARTITION, key, first_seen=now, state="suspect", owner_job=job_id or None)
        mark.reason = reason
        try:
            mark.save(condition=self.model.at.does_not_exist())
        except PutError:
            return self.model.get(MARKS_PARTITION, key, consistent_read=True)  # seen before
        return mark

    def claim_kill(self, mark: ReaperMark) -> bool:
        try:
            mark.update(actions=[self.model.state.set("killed")], condition=self.model.state == "suspect")
        except UpdateError:
            return False
        return True

    def forget(self, provider: str, cluster_id: str) -> None:
        with contextlib.suppress(DeleteError):
            self.model(MARKS_PARTITION, mark_key(provider, cluster_id)).delete()
