"""The schedule and notification stores and the reaper's marks in memory (`ScheduleStore`:
shared/store/schedules.py, `NotificationStore`: shared/store/notifications.py, `ReaperMarks`:
shared/store/reaper_marks.py) with DynamoDB's conditions, for tests without an endpoint.
tests/unit/test_{schedule_store,notification_store,reaper_marks}_contract.py hold them to the same
assertions as the DynamoDB adapters. As in shared/store/memory.py, items are kept serialized and every read
answers a fresh record: a caller's record is a copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from shared.store.notifications import NotificationItem
from shared.store.reaper_marks import MARKS_PARTITION, ReaperMark, mark_key
from shared.store.schedules import ScheduleModel

Item = dict[str, Any]


class MemoryScheduleStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._rows: dict[tuple[str, str], Item] = {}

    def new_schedule(self, owner: str, name: str, **fields: Any) -> ScheduleModel:
        return ScheduleModel(owner, name, **fields)

    def create(self, row: ScheduleModel) -> bool:
        with self._lock:
            if (row.owner, row.name) in self._rows:
                return False
            self._rows[(row.owner, row.name)] = row.serialize()
        return True

    def get(self, owner: str, name: str) -> ScheduleModel | None:
        with self._lock:
            item = self._rows.get((owner, name))
        return ScheduleModel.from_raw_data(item) if item is not None else None

    def of_owner(self, owner: str) -> list[ScheduleModel]:
        with self._lock:
            keys = sorted(key for key in self._rows if key[0] == owner)
            return [ScheduleModel.from_raw_data(self._rows[key]) for key in keys]

    def every(self) -> Iterator[ScheduleModel]:
        with self._lock:
            items = list(self._rows.values())
        return (ScheduleModel.from_raw_data(item) for item in items)

    def set_paused(self, row: ScheduleModel, paused: bool, *, fired_through: float | None = None) -> bool:
        def change(stored: ScheduleModel) -> None:
            stored.paused = paused
            if fired_through is not None:
                stored.fired_through = fired_through

        return self._update(row, change)

    def mark_fired(self, row: ScheduleModel, through: float) -> bool:
        return self._update(row, lambda stored: setattr(stored, "fired_through", through))

    def count_skipped(self, row: ScheduleModel) -> bool:
        return self._update(row, lambda stored: setattr(stored, "skipped", (stored.skipped or 0) + 1))

    def record_run(self, row: ScheduleModel, job_id: str, fired_at: str) -> bool:
        def change(stored: ScheduleModel) -> None:
            stored.last_job_id = job_id
            stored.last_fired_at = fired_at
            stored.runs = (stored.runs or 0) + 1

        return self._update(row, change, unless=lambda stored: stored.last_job_id == job_id)

    def delete(self, row: ScheduleModel) -> None:
        with self._lock:
            self._rows.pop((row.owner, row.name), None)

    def _update(
        self,
        row: ScheduleModel,
        change: Callable[[ScheduleModel], None],
        unless: Callable[[ScheduleModel], bool] = lambda stored: False,
    ) -> bool:
        with self._lock:
            item = self._rows.get((row.owner, row.name))
            if item is None:
                return False
            stored = ScheduleModel.from_raw_data(item)
            if stored.schedule_id != row.schedule_id or unless(stored):
                return False
            change(stored)
            self._rows[(row.owner, row.name)] = stored.serialize()
        for name, value in stored.attribute_values.items():  # as DynamoDB's ALL_NEW answer sets them
            setattr(row, name, value)
        return True


class MemoryNotificationStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, Item] = {}

    def new_item(self, pk: str, **fields: Any) -> NotificationItem:
        return NotificationItem(pk=pk, **fields)

    def read(self, pk: str) -> NotificationItem | None:
        with self._lock:
            item = self._items.get(pk)
        return NotificationItem.from_raw_data(item) if item is not None else None

    def save(self, item: NotificationItem) -> None:
        with self._lock:
            self._items[item.pk] = item.serialize()

    def claim_send(self, key: str) -> bool:
        item = NotificationItem(pk=key, status="sending", attempts=0, updated_at=time.time())
        with self._lock:
            if key in self._items:
                return False
            self._items[key] = item.serialize()
        return True

    def finish_send(self, key: str, *, ok: bool, attempts: int) -> None:
        self.save(NotificationItem(pk=key, status="sent" if ok else "failed", attempts=attempts,
                                   updated_at=time.time()))  # fmt: skip


class MemoryReaperMarks:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._marks: dict[str, Item] = {}

    def of_provider(self, provider: str) -> dict[str, ReaperMark]:
        prefix = mark_key(provider, "")
        with self._lock:
            found = [
                ReaperMark.from_raw_data(item) for key, item in self._marks.items() if key.startswith(prefix)
            ]
        return {mark.cluster_id: mark for mark in found}

    def mark(self, provider: str, cluster_id: str, *, now: float, job_id: str, reason: str) -> ReaperMark:
        key = mark_key(provider, cluster_id)
        with self._lock:
            if key in self._marks:
                return ReaperMark.from_raw_data(self._marks[key])
            mark = ReaperMark(MARKS_PARTITION, key, first_seen=now, state="suspect", owner_job=job_id or None,
                              reason=reason)  # fmt: skip
            self._marks[key] = mark.serialize()
        return mark

    def claim_kill(self, mark: ReaperMark) -> bool:
        with self._lock:
            item = self._marks.get(mark.at)
            if item is None or ReaperMark.from_raw_data(item).state != "suspect":
                return False
            stored = ReaperMark.from_raw_data(item)
            stored.state = "killed"
            self._marks[mark.at] = stored.serialize()
        mark.state = "killed"
        return True

    def forget(self, provider: str, cluster_id: str) -> None:
        with self._lock:
            self._marks.pop(mark_key(provider, cluster_id), None)
