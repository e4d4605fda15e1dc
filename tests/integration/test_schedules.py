"""Cron schedules: the API records them (and an EventBridge Scheduler schedule in moto); the local
runtime's dispatcher fires them on its (injected) clock; each firing runs once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from chalice.test import Client
from conftest import QueueDriver

from functions.submit.app import app
from functions.submit.handler import handler as submit_handler
from local_runtime.dispatcher import Dispatcher
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.job_listing import list_jobs
from shared.schedules.operations import Firing, create_schedule, get_schedule, run_firing
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

TASK = "name: nightly\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo hello\n"
T0 = datetime(2026, 11, 22, 3, 0, 30, tzinfo=UTC)


class Api:
    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        send = getattr(self.client.http, method.lower())
        if body is None:
            return send(path, headers=self.headers)
        return send(path, headers=self.headers, body=json.dumps(body))


@pytest.fixture
def api(stack: Settings) -> Iterator[Api]:
    with Client(app) as client:
        yield Api(client, create_user("alice", stack))


def scheduler(settings: Settings) -> Any:
    return boto3.client("scheduler", endpoint_url=settings.endpoint_url, region_name=settings.region)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def fire_and_deliver(dispatcher: Dispatcher, queues: QueueDriver, times: int = 1) -> list[Any]:
    fired = dispatcher.fire_schedules()
    records = queues.receive("submit")
    assert submit_handler(queues.event([r for r in records for _ in range(times)]), None) == {
        "batchItemFailures": []
    }
    return fired


def test_creating_a_schedule_stores_it_and_its_eventbridge_scheduler_schedule(
    stack: Settings, api: Api
) -> None:
    body = {
        "name": "nightly",
        "cron": "0 3 * * 1-5",
        "timezone": "Europe/Paris",
        "task": TASK,
        "env": {"A": "1"},
    }
    answer = api.call("POST", "/schedules", body)
    assert answer.status_code == 201, answer.json_body
    view = answer.json_body
    assert view["cron"] == "0 3 * * 1-5" and view["overlap"] == "skip" and view["next_run"]
    aws = scheduler(stack).get_schedule(Name=f"{stack.prefix}-{view['schedule_id']}")
    assert aws["ScheduleExpression"] == "cron(0 3 ? * 2-6 *)"
    assert aws["ScheduleExpressionTimezone"] == "Europe/Paris" and aws["State"] == "ENABLED"
    assert aws["Target"]["Arn"].endswith(f":{stack.queue_name('submit')}")
    firing = json.loads(aws["Target"]["Input"])["schedule_firing"]
    assert firing["schedule_id"] == view["schedule_id"]
    assert firing["scheduled_time"] == "<aws.scheduler.scheduled-time>"

    assert api.call("POST", "/schedules/nightly/pause").json_body["paused"] is True
    assert scheduler(stack).get_schedule(Name=f"{stack.prefix}-{view['schedule_id']}")["State"] == "DISABLED"
    assert api.call("POST", "/schedules/nightly/resume").json_body["paused"] is False
    assert [s["name"] for s in api.call("GET", "/schedules").json_body["schedules"]] == ["nightly"]
    assert api.call("DELETE", "/schedules/nightly").status_code == 200
    assert api.call("GET", "/schedules/nightly").status_code == 404
    names = [s["Name"] for s in scheduler(stack).list_schedules()["Schedules"]]
    assert f"{stack.prefix}-{view['schedule_id']}" not in names


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"cron": "61 * * * *"}, 400, "cron"),
        ({"timezone": "Mars/Olympus"}, 400, "timezone"),
        ({"name": "no spaces"}, 400, "name"),
        ({"overlap": "sometimes"}, 422, "overlap"),
        ({"task": "resources:\n  cpuz: 2\nrun: echo\n"}, 400, "resources.cpuz"),
    ],
)
def test_bad_schedules_are_4xx_naming_the_field(
    stack: Settings, api: Api, change: dict[str, Any], status: int, field: str
) -> None:
    answer = api.call("POST", "/schedules", {"name": "n", "cron": "* * * * *", "task": TASK, **change})
    assert answer.status_code == status, answer.json_body
    assert field in (answer.json_body["field"] or ""), answer.json_body


def test_a_second_schedule_of_the_same_name_is_a_conflict(stack: Settings, api: Api) -> None:
    body = {"name": "n", "cron": "* * * * *", "task": TASK}
    assert api.call("POST", "/schedules", body).status_code == 201
    assert api.call("POST", "/schedules", body).status_code == 409


def test_a_schedule_firing_every_minute_runs_twice_on_the_local_runtimes_clock(
    stack: Settings, queues: QueueDriver
) -> None:
    create_schedule(stack, owner="u-1", name="m", cron="* * * * *", task_text=TASK, overlap="allow",
                    now=T0.timestamp())  # fmt: skip
    clock = Clock(T0 + timedelta(seconds=20))
    dispatcher = Dispatcher(stack, schedules={}, notify_stream=False, clock=clock)
    assert fire_and_deliver(dispatcher, queues) == []  # 03:00:50: nothing due yet
    clock.now = T0 + timedelta(seconds=40)  # 03:01:10
    (first,) = fire_and_deliver(dispatcher, queues, times=2)  # delivered twice: runs once
    assert first.scheduled_time == "2026-11-22T03:01:00+00:00"
    assert fire_and_deliver(dispatcher, queues) == []  # the same minute again: nothing new
    clock.now = T0 + timedelta(seconds=95)  # 03:02:05
    fire_and_deliver(dispatcher, queues)
    jobs = list_jobs(wiring_for(stack), owner="u-1")
    assert len(jobs) == 2 and {j.name for j in jobs} == {"nightly"}
    row = get_schedule(stack, owner="u-1", name="m")
    assert row.runs == 2 and row.last_fired_at == "2026-11-22T03:02:00+00:00"
    assert len(queues.bodies("provision")) == 2


def test_overlap_skip_runs_nothing_while_the_previous_run_is_live(
    stack: Settings, queues: QueueDriver
) -> None:
    create_schedule(stack, owner="u-2", name="s", cron="* * * * *", task_text=TASK, now=T0.timestamp())
    clock = Clock(T0 + timedelta(seconds=40))
    dispatcher = Dispatcher(stack, schedules={}, notify_stream=False, clock=clock)
    fire_and_deliver(dispatcher, queues)
    (job,) = list_jobs(wiring_for(stack), owner="u-2")
    clock.now += timedelta(minutes=1)
    fire_and_deliver(dispatcher, queues)
    assert len(list_jobs(wiring_for(stack), owner="u-2")) == 1
    assert get_schedule(stack, owner="u-2", name="s").skipped == 1
    cancel_job(wiring_for(stack), job.job_id, owner="u-2")
    clock.now += timedelta(minutes=1)
    fire_and_deliver(dispatcher, queues)
    assert len(list_jobs(wiring_for(stack), owner="u-2")) == 2


def test_a_paused_schedule_does_not_fire_and_a_deleted_ones_late_firing_runs_nothing(
    stack: Settings, api: Api, queues: QueueDriver
) -> None:
    assert api.call("POST", "/schedules", {"name": "p", "cron": "* * * * *", "task": TASK}).status_code == 201
    user = find_user(api.headers["Authorization"].split()[1], stack)
    assert user is not None
    api.call("POST", "/schedules/p/pause")
    dispatcher = Dispatcher(stack, schedules={}, notify_stream=False,
                            clock=lambda: datetime.now(UTC) + timedelta(minutes=5))  # fmt: skip
    assert fire_and_deliver(dispatcher, queues) == []
    api.call("POST", "/schedules/p/resume")
    (firing,) = dispatcher.fire_schedules()
    api.call("DELETE", "/schedules/p")
    assert submit_handler(queues.event(queues.receive("submit")), None) == {"batchItemFailures": []}
    assert list_jobs(wiring_for(stack), owner=user.user_id) == [] and firing.owner == user.user_id


def test_a_user_sees_and_touches_only_their_own_schedules(stack: Settings, api: Api) -> None:
    assert (
        api.call("POST", "/schedules", {"name": "mine", "cron": "* * * * *", "task": TASK}).status_code == 201
    )
    with Client(app) as client:
        bob = Api(client, create_user("bob", stack))
        assert bob.call("GET", "/schedules").json_body == {"schedules": []}
        for method, path in (("GET", "/schedules/mine"), ("POST", "/schedules/mine/pause"),
                             ("DELETE", "/schedules/mine")):  # fmt: skip
            assert bob.call(method, path).status_code == 404
    assert api.call("GET", "/schedules/mine").json_body["paused"] is False


def test_a_firing_handled_twice_at_once_counts_one_run(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = create_schedule(stack, owner="u-3", name="d", cron="* * * * *", task_text=TASK, overlap="allow",
                          now=T0.timestamp())  # fmt: skip
    firing = Firing("u-3", "d", row.schedule_id, "2026-11-22T03:01:00+00:00")
    # both deliveries look for the firing's job before either has made it
    monkeypatch.setattr(type(wiring_for(stack).store), "get", lambda self, job_id: None)
    assert run_firing(stack, firing).result == "submitted"
    assert run_firing(stack, firing).result == "submitted"
    monkeypatch.undo()
    assert get_schedule(stack, owner="u-3", name="d").runs == 1
    assert len(list_jobs(wiring_for(stack), owner="u-3")) == 1
