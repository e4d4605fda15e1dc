"""The schedules table: one row per (owner, schedule name), holding the task text it runs."""

from __future__ import annotations

from functools import cache

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
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
    created_at = NumberAttribute()
    fired_through = NumberAttribute()  # epoch seconds: firings up to here have been sent
    last_job_id = UnicodeAttribute(null=True)
    last_fired_at = UnicodeAttribute(null=True)  # ISO scheduled time of the last firing that ran
    runs = NumberAttribute(default=0)
    skipped = NumberAttribute(default=0)


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
