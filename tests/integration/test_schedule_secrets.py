"""A scheduled task's secrets: given to POST /schedules (the real Chalice app, and the API over HTTP), kept in
Secrets Manager on the moto server, in no table, no answer and no log; each firing (the submit handler fed the
queue's SQS event) gives them to the job, and real agents on the local cloud see them in their environment."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from chalice.test import Client
from conftest import QueueDriver, _free_port
from secret_leaks import holds, objects_holding, table_items_holding
from test_lifecycle_agents import deliver, log_text, wait_for

from functions.submit.app import app
from functions.submit.handler import handler as submit_handler
from local_runtime.api_server import ApiServer, load_app
from local_runtime.dispatcher import Dispatcher
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.job_listing import list_jobs
from shared.jobs.task_records import secrets_of
from shared.schedules.operations import Firing, get_schedule, run_firing
from shared.states import JobState, is_terminal
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

HF = "hf_PLANTEDscheduleSECRET0123456789"
INLINE = "PLANTEDinlineVALUEwrittenInTheFile42"
TASK = f"""name: nightly-secret
resources:
  cpus: 1+
secrets:
  HF_TOKEN: null
  API_KEY: {INLINE}
run: |
  printf 'hf %s\\n' "$(printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1)"
  printf 'api %s\\n' "$(printf %s "$API_KEY" | sha256sum | cut -d' ' -f1)"
"""


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def secrets_manager(settings: Settings) -> Any:
    return boto3.client("secretsmanager", endpoint_url=settings.endpoint_url, region_name=settings.region)


def schedule_secret_names(settings: Settings) -> list[str]:
    listed = secrets_manager(settings).list_secrets()["SecretList"]
    return sorted(s["Name"] for s in listed if s["Name"].startswith(f"{settings.prefix}/schedule/"))


def assert_nowhere(settings: Settings, *texts: str) -> None:
    s3 = boto3.client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region)
    for value in (HF, INLINE):
        assert table_items_holding(settings.endpoint_url or "", settings.region, settings.prefix, value) == []
        assert objects_holding(s3, settings.bucket, value) == []
        for text in texts:
            assert not holds(text, value)


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


def fire(settings: Settings, queues: QueueDriver, times: int = 1) -> list[Firing]:
    """The local runtime's scheduler two minutes from now, each firing delivered `times` times."""
    dispatcher = Dispatcher(settings, schedules={}, notify_stream=False,
                            clock=lambda: datetime.now(UTC) + timedelta(minutes=2))  # fmt: skip
    fired = dispatcher.fire_schedules()
    records = queues.receive("submit")
    answer = submit_handler(queues.event([r for r in records for _ in range(times)]), None)
    assert answer == {"batchItemFailures": []}
    return fired


def test_schedule_secrets_live_in_secrets_manager_and_reach_each_firings_job_only(
    stack: Settings, api: Api, queues: QueueDriver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(
        logging.INFO
    )  # and skyless's own loggers at DEBUG (botocore's DEBUG prints request bodies)
    caplog.set_level(logging.DEBUG, logger="skyless")
    body = {"name": "nightly", "cron": "* * * * *", "task": TASK, "secrets": {"HF_TOKEN": HF}}

    created = api.call("POST", "/schedules", body)

    assert created.status_code == 201, created.json_body
    assert created.json_body["secrets"] == ["API_KEY", "HF_TOKEN"]
    shown = api.call("GET", "/schedules/nightly").body.decode()
    listed = api.call("GET", "/schedules").body.decode()
    assert '"HF_TOKEN"' in shown and '"API_KEY"' in listed
    (name,) = schedule_secret_names(stack)
    assert name == f"{stack.prefix}/schedule/{created.json_body['schedule_id']}"
    kept = json.loads(secrets_manager(stack).get_secret_value(SecretId=name)["SecretString"])
    assert kept == {"HF_TOKEN": HF, "API_KEY": INLINE}
    owner = find_user(api.headers["Authorization"][7:], stack)
    assert owner is not None
    row = get_schedule(stack, owner=owner.user_id, name="nightly")
    assert "API_KEY" in row.task_text and "run:" in row.task_text  # the file kept, its values not

    (firing,) = fire(stack, queues, times=2)  # delivered twice: one job

    (job,) = list_jobs(wiring_for(stack), owner=firing.owner)
    wiring = wiring_for(stack)
    assert secrets_of(wiring, wiring.store.get(job.job_id), 0) == {"HF_TOKEN": HF, "API_KEY": INLINE}
    assert_nowhere(stack, created.body.decode(), shown, listed, caplog.text)

    assert api.call("DELETE", "/schedules/nightly").status_code == 200
    assert schedule_secret_names(stack) == []  # deleted with the schedule, at once


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"secrets": {}}, 400, "secrets.HF_TOKEN"),  # a null secret needs its value now, not at 3 a.m.
        ({"secrets": ["HF_TOKEN"]}, 422, "secrets"),
        ({"secrets": {"HF_TOKEN": 7}}, 422, "secrets.HF_TOKEN"),
    ],
)
def test_bad_schedule_secrets_are_4xx_naming_the_field_and_never_echo_a_value(
    stack: Settings, api: Api, change: dict[str, Any], status: int, field: str
) -> None:
    answer = api.call("POST", "/schedules", {"name": "n", "cron": "* * * * *", "task": TASK, **change})
    assert answer.status_code == status, answer.json_body
    assert answer.json_body["field"] == field, answer.json_body
    if field == "secrets.HF_TOKEN" and status == 400:
        assert answer.json_body["line"] == 5  # the file's `HF_TOKEN: null`
    assert not holds(answer.body.decode(), INLINE) and schedule_secret_names(stack) == []


def test_only_the_secrets_the_task_declares_are_kept(stack: Settings, api: Api) -> None:
    body = {"name": "n", "cron": "* * * * *", "task": TASK, "secrets": {"HF_TOKEN": HF, "UNUSED": "x"}}
    assert api.call("POST", "/schedules", body).status_code == 201
    (name,) = schedule_secret_names(stack)
    kept = json.loads(secrets_manager(stack).get_secret_value(SecretId=name)["SecretString"])
    assert set(kept) == {"HF_TOKEN", "API_KEY"}


def test_a_refused_second_create_leaves_no_secret_behind(stack: Settings, api: Api) -> None:
    body = {"name": "n", "cron": "* * * * *", "task": TASK, "secrets": {"HF_TOKEN": HF}}
    assert api.call("POST", "/schedules", body).status_code == 201
    assert api.call("POST", "/schedules", body).status_code == 409
    assert len(schedule_secret_names(stack)) == 1


def test_a_firing_whose_secret_is_gone_runs_nothing_and_says_so(stack: Settings, api: Api) -> None:
    body = {"name": "n", "cron": "* * * * *", "task": TASK, "secrets": {"HF_TOKEN": HF}}
    view = api.call("POST", "/schedules", body).json_body
    (name,) = schedule_secret_names(stack)
    secrets_manager(stack).delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
    owner = find_user(api.headers["Authorization"][7:], stack)
    assert owner is not None

    outcome = run_firing(stack, Firing(owner.user_id, "n", view["schedule_id"], "2026-11-23T03:00:00+00:00"))

    assert outcome.result == "secrets_missing" and list_jobs(wiring_for(stack), owner=owner.user_id) == []
    (note,) = wiring_for(stack).store.timeline(f"schedule#{view['schedule_id']}")
    assert note.kind == "schedule_failed" and "HF_TOKEN" in note.message and HF not in note.message


@pytest.fixture
def agents_api(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Settings, str]]:
    """The API over real HTTP, which the nodes' agents fetch their config from."""
    server = ApiServer(load_app(), "127.0.0.1", _free_port())
    server.start()
    monkeypatch.setenv("SKYLESS_API_URL", server.url)
    monkeypatch.setenv("SKYLESS_LOG_FLUSH_SECONDS", "0.5")
    try:
        yield Settings.from_env(), server.url
    finally:
        cloud = LocalCloud(stack.home)
        for cluster_id in {node.cluster_id for node in cloud.list_owned()}:
            cloud.terminate(cluster_id)
        server.stop()


def test_a_scheduled_firing_puts_the_secret_in_the_nodes_environment(
    agents_api: tuple[Settings, str], queues: QueueDriver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(
        logging.INFO
    )  # and skyless's own loggers at DEBUG (botocore's DEBUG prints request bodies)
    caplog.set_level(logging.DEBUG, logger="skyless")
    settings, url = agents_api
    key = create_user("alice", settings)
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    body = {"name": "nightly", "cron": "* * * * *", "task": TASK, "secrets": {"HF_TOKEN": HF}}
    assert http.post("/schedules", json=body).status_code == 201

    (firing,) = fire(settings, queues)
    (job,) = list_jobs(wiring_for(settings), owner=firing.owner)
    deliver(queues, "provision")
    done = wait_for(settings, job.job_id, lambda v: is_terminal(v.state), timeout=90)

    assert done.state == JobState.SUCCEEDED, (done.reason, log_text(settings, job.job_id))
    wait_for(settings, job.job_id, lambda v: "api " in log_text(settings, job.job_id), timeout=20)
    log = log_text(settings, job.job_id)
    assert f"hf {digest(HF)}" in log and f"api {digest(INLINE)}" in log
    answers = http.get("/schedules").text + http.get(f"/jobs/{job.job_id}").text
    assert_nowhere(settings, log, answers, caplog.text)


def test_schedule_create_with_secret_as_a_user_types_it_never_prints_a_value(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    from test_schedules_cli import _run

    task = tmp_path / "nightly.yaml"
    task.write_text(TASK)
    refused = _run("schedule", "create", "nightly", str(task), "--cron", "0 3 * * *", *cli_api)
    assert refused.exit_code == 2 and "secrets.HF_TOKEN" in refused.output and ":5:" in refused.output
    typo = _run("schedule", "create", "nightly", str(task), "--cron", "0 3 * * *", "--secret", HF, *cli_api)
    assert typo.exit_code == 2 and "--secret" in typo.output

    created = _run("schedule", "create", "nightly", str(task), "--cron", "0 3 * * *",
                   "--secret", f"HF_TOKEN={HF}", *cli_api)  # fmt: skip
    shown = _run("schedule", "show", "nightly", *cli_api)
    listed = _run("schedule", "list", *cli_api)

    assert created.exit_code == 0, created.output
    assert "'API_KEY', 'HF_TOKEN'" in shown.output  # the names, never the values
    assert len(schedule_secret_names(stack)) == 1
    assert_nowhere(stack, created.output, typo.output, shown.output, listed.output)
    assert _run("schedule", "delete", "nightly", *cli_api).exit_code == 0
    assert schedule_secret_names(stack) == []
