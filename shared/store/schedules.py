"""The schedules table: one row per (owner, schedule name), holding the task text it runs; the
`ScheduleStore` port the schedule operations (shared/schedules/operations.py) ask, and its DynamoDB adapter.
`shared.store.memory_records.MemoryScheduleStore` keeps the same conditions in memory;
tests/unit/test_schedule_store_contract.py holds both to one contract.

Rows are `ScheduleModel` records used as plain values: build new ones with `new_schedule`; only the store
writes them. A write that changes a row also sets the new values on the caller's record.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any, Protocol

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist, PutError, UpdateError
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session


class ScheduleModel(Model):
    """A cron schedule. `schedule_id` is new at each create, so a deleted-then-recreated name never
    inherits the old schedule's firings; `fired_through` is the local runtime's clock mark."""

    class Meta:
        table_name = "unbound-schedules"

    owner = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    schedule_id = UnicodeAttribute()
    cron = UnicodeAttribute()
    timezone = UnicodeAttribute(default="UTC")
    overlap = UnicodeAttribute(default="skip")  # skip | allow
    paused = BooleanAttribute(default=False)
    task_text = UnicodeAttribute()
    filename = UnicodeAttribute(default="task.yaml")
    env = UnicodeAttribute(default="{}")  # JSON object of env overrides
    minimize = UnicodeAttribute(default="cost")
    clouds = UnicodeAttribute(null=True)  # JSON list, None = every configured cloud
    secret_names = UnicodeAttribute(null=True)  # JSON list: names only, values in Secrets Manager
    created_at = NumberAttribute()
    fired_through = NumberAttribute()  # epoch seconds: firings up to here have been sent
    last_job_id = UnicodeAttribute(null=True)
    last_fired_at = UnicodeAttribute(null=True)  # ISO scheduled time of the last firing that ran
    runs = NumberAttribute(default=0)
    skipped = NumberAttribute(default=0)


class ScheduleStore(Protocol):
    """Every write names the row it means by (owner, name) and, where it says so, by `schedule_id`: a row
    deleted (or deleted and recreated) since it was read is never brought back or changed by a late write."""

    def new_schedule(self, owner: str, name: str, **fields: Any) -> ScheduleModel:
        """An unsaved row (`create` writes it)."""
        ...

    def create(self, row: ScheduleModel) -> bool:
        """Write a new row; False (and nothing written) when the owner already has a schedule of that name."""
        ...

    def get(self, owner: str, name: str) -> ScheduleModel | None:
        """The row, read consistently; None when there is none."""
        ...

    def of_owner(self, owner: str) -> list[ScheduleModel]:
        """The owner's rows, by name."""
        ...

    def every(self) -> Iterator[ScheduleModel]:
        """Every row of every owner (the local runtime's scheduler walks them)."""
        ...

    def set_paused(self, row: ScheduleModel, paused: bool, *, fired_through: float | None = None) -> bool:
        """Set `paused` (and `fired_through` when given) on the row of this schedule id; False when gone."""
        ...

    def mark_fired(self, row: ScheduleModel, through: float) -> bool:
        """Move `fired_through` on the row of this schedule id; False when it was deleted or recreated."""
        ...

    def count_skipped(self, row: ScheduleModel) -> bool:
        """Add one to `skipped` on the row of this schedule id; False when gone."""
        ...

    def record_run(self, row: ScheduleModel, job_id: str, fired_at: str) -> bool:
        """Set `last_job_id`/`last_fired_at` and count one run, unless `last_job_id` is already `job_id`
        (two deliveries of one firing count once) or the row is gone: then False and nothing written."""
        ...

    def delete(self, row: ScheduleModel) -> None:
        """Delete the row (again: nothing)."""
        ...


@cache
def schedules_model(settings: Settings) -> type[ScheduleModel]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("schedules"),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    return with_shared_session(type(f"ScheduleModel_{settings.prefix}", (ScheduleModel,), {"Meta": meta}))


def ensure_schedules_table(settings: Settings) -> None:
    model = schedules_model(settings)
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def _condition_failed(error: PutError | UpdateError) -> bool:
    return "ConditionalCheckFailed" in str(getattr(error, "cause_response_code", "") or error)


class DynamoScheduleStore:
    def __init__(self, settings: Settings) -> None:
        self.model = schedules_model(settings)

    def new_schedule(self, owner: str, name: str, **fields: Any) -> ScheduleModel:
        return self.model(owner, name, **fields)

    def create(self, row: ScheduleModel) -> bool:
        try:
            row.save(condition=self.model.owner.does_not_exist())
        except PutError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def get(self, owner: str, name: str) -> ScheduleModel | None:
        try:
            return self.model.get(owner, name, consistent_read=True)
        except DoesNotExist:
            return None

    def of_owner(self, owner: str) -> list[ScheduleModel]:
        return list(self.model.query(owner))

    def every(self) -> Iterator[ScheduleModel]:
        return iter(self.model.scan())

    def set_paused(self, row: ScheduleModel, paused: bool, *, fired_through: float | None = None) -> bool:
        actions: list[Action] = [self.model.paused.set(paused)]
        if fired_through is not None:
            actions.append(self.model.fired_through.set(fired_through))
        return self._update(row, actions)

    def mark_fired(self, row: ScheduleModel, through: float) -> bool:
        return self._update(row, [self.model.fired_through.set(through)])

    def count_skipped(self, row: ScheduleModel) -> bool:
        return self._update(row, [self.model.skipped.add(1)])

    def record_run(self, row: ScheduleModel, job_id: str, fired_at: str) -> bool:
        model = self.model
        actions: list[Action] = [
            model.last_job_id.set(job_id),
            model.last_fired_at.set(fired_at),
            model.runs.add(1),
        ]
        return self._update(
            row, actions, (model.last_job_id.does_not_exist() | (model.last_job_id != job_id))
        )

    def delete(self, row: ScheduleModel) -> None:
        row.delete()

    def _update(self, row: ScheduleModel, actions: list[Action], extra: Any = None) -> bool:
        condition = self.model.schedule_id == row.schedule_id
        try:
            row.update(actions=actions, condition=condition if extra is None else condition & extra)
        except UpdateError as error:
            if _condition_failed(error):
                return False
            raise
        return True
