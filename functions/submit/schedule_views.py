"""Between the /schedules routes and shared.schedules: validate, call one operation, shape the answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from functions.submit.job_views import plan_task_file, read_task
from shared.api.schedule_models import CreateScheduleRequest, ScheduleList, ScheduleView
from shared.config import Settings
from shared.jobs.containers import check_containers
from shared.jobs.submission import check_task_storage
from shared.schedules.operations import (
    create_schedule,
    delete_schedule,
    get_schedule,
    list_schedules,
    next_run,
    secret_names_of,
    set_paused,
)
from shared.store.schedules import ScheduleModel
from shared.store.users import User


def view_of(row: ScheduleModel) -> ScheduleView:
    upcoming = next_run(row)
    return ScheduleView(
        name=row.name,
        schedule_id=row.schedule_id,
        cron=row.cron,
        timezone=row.timezone,
        overlap=row.overlap,
        paused=bool(row.paused),
        filename=row.filename,
        env=json.loads(row.env or "{}"),
        secrets=secret_names_of(row),
        created_at=datetime.fromtimestamp(row.created_at, UTC).isoformat(),
        next_run=upcoming.isoformat() if upcoming else None,
        last_job_id=row.last_job_id,
        last_fired_at=row.last_fired_at,
        runs=int(row.runs or 0),
        skipped=int(row.skipped or 0),
    )


def create(settings: Settings, caller: User, body: CreateScheduleRequest) -> ScheduleView:
    plan_task_file(settings, body)  # a task nothing can run is refused now, not at 3 a.m.
    task_text, pipeline = body.task_text(), read_task(body)
    check_containers(settings, pipeline, filename=body.filename, text=task_text, clouds=body.clouds)
    check_task_storage(
        settings, pipeline, owner=caller.user_id, keys={}, filename=body.filename, text=task_text
    )
    row = create_schedule(
        settings,
        owner=caller.user_id,
        name=body.name,
        cron=body.cron,
        task_text=body.task_text(),
        filename=body.filename,
        timezone=body.timezone,
        overlap=body.overlap,
        env=body.env,
        secrets=body.secrets,
        minimize=body.minimize,
        clouds=body.clouds,
    )
    return view_of(row)


def list_for(settings: Settings, caller: User) -> ScheduleList:
    return ScheduleList(schedules=[view_of(r) for r in list_schedules(settings, owner=caller.user_id)])


def show(settings: Settings, caller: User, name: str) -> ScheduleView:
    return view_of(get_schedule(settings, owner=caller.user_id, name=name))


def pause(settings: Settings, caller: User, name: str, *, paused: bool) -> ScheduleView:
    return view_of(set_paused(settings, owner=caller.user_id, name=name, paused=paused))


def delete(settings: Settings, caller: User, name: str) -> dict[str, str]:
    delete_schedule(settings, owner=caller.user_id, name=name)
    return {"name": name, "state": "deleted"}
