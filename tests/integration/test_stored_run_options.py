"""A job stored before `config.docker.run_options` was applied and checked, holding an option refused at
submit since (`--name`): it ends FAILED with the reason naming the field, its nodes torn down, through the
real provision handler and the real config route (chalice.test.Client), never a 500 nor a job left stuck,
and the options are never dropped. The record is written as the old code wrote it: the task JSON as stored,
with the option in it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chalice.test import Client
from conftest import QueueDriver
from test_node_credentials import _boot_headers, _fetch, _launched

from functions.provision.handler import handler as provision_handler
from functions.submit.app import app
from shared.config import Settings
from shared.jobs.planning import plan_job
from shared.jobs.tokens import boot_token
from shared.jobs.views import get_job
from shared.states import JobState
from shared.store.jobs import DynamoJobStore
from shared.store.users import create_user
from shared.wiring import wiring_for

TASK = "name: hello\nresources:\n  cpus: 2+\nrun: echo hello\n"
FIELD = "config.docker.run_options"


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def _submitted(client: Client, stack: Settings) -> str:
    answer = client.http.post(
        "/jobs",
        headers={"Authorization": f"Bearer {create_user('old', stack)}"},
        body=json.dumps({"task": TASK, "filename": "hello.yaml"}),
    )
    assert answer.status_code == 201, answer.json_body
    job_id: str = answer.json_body["job_id"]
    return job_id


def _stored_before_the_check(stack: Settings, job_id: str) -> None:
    """The job's task as the code before the check stored it: a container with `--name mine` among its
    run options (then kept, unchecked and unapplied)."""
    store = wiring_for(stack).store
    assert isinstance(store, DynamoJobStore)
    job = store.get(job_id)
    assert job is not None and job.task
    pipeline = json.loads(job.task)
    pipeline["tasks"][0]["resources"]["image_id"] = "docker:ubuntu:22.04"
    pipeline["tasks"][0]["config"] = {"docker": {"run_options": ["--shm-size=1g", "--name mine"]}}
    text = json.dumps(pipeline, separators=(",", ":"))
    store.jobs._get_connection().update_item(job_id, actions=[store.jobs.task.set(text)])


def _failed_naming_the_field(stack: Settings, job_id: str) -> str:
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.FAILED.value
    assert view.reason is not None and view.reason.startswith(f"{FIELD}: --name cannot be given")
    failed = [e for e in view.timeline if e.get("state") == JobState.FAILED.value]
    assert len(failed) == 1 and failed[0]["message"] == view.reason, view.timeline
    return view.reason


def test_its_nodes_config_fetch_fails_the_job_and_stops_the_node_never_a_500(
    stack: Settings, client: Client, queues: QueueDriver
) -> None:
    job_id = _submitted(client, stack)
    _stored_before_the_check(stack, job_id)
    _launched(stack, job_id, "i-old")  # launched before the change: its node asks for its config now
    queues.receive("provision")
    headers = _boot_headers(boot_token(stack, job_id, 0))

    answers = [_fetch(client, job_id, "i-old", headers) for _ in range(2)]  # and the agent asks again

    for answer in answers:
        assert answer.status_code == 410, answer.json_body  # the agent kills its task and exits
        assert answer.json_body["stop"] is True and answer.json_body["field"] == FIELD
        assert "--name cannot be given" in answer.json_body["message"]
    _failed_naming_the_field(stack, job_id)
    teardowns = [b for b in queues.bodies("teardown") if b.get("job_id") == job_id]
    assert [b["cluster_id"] for b in teardowns] == [f"{job_id}-0"]  # once, though asked twice
    stored = wiring_for(stack).store.get(job_id)
    assert stored is not None and "--name mine" in (stored.task or "")  # kept as submitted, not dropped


def test_provisioning_fails_it_before_any_node_is_launched(
    stack: Settings, client: Client, queues: QueueDriver
) -> None:
    job_id = _submitted(client, stack)
    _stored_before_the_check(stack, job_id)
    plan_job({"job_id": job_id, "attempt": 0}, wiring_for(stack))  # planned before the change
    records = queues.receive("provision")
    assert records

    for _ in range(2):  # the message arrives twice
        assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}

    _failed_naming_the_field(stack, job_id)
    assert wiring_for(stack).store.cluster(f"{job_id}-0") is None  # nothing launched, nothing to pay for


def test_a_job_running_before_the_change_reports_its_end_as_ever(stack: Settings, client: Client) -> None:
    """Its node fetched its config when the options were not applied: its reports are answered, and its
    end is the task's (the pipeline's length is read from the stored records, not the checked models)."""
    job_id = _submitted(client, stack)
    _launched(stack, job_id, "i-run")
    config = _fetch(client, job_id, "i-run", _boot_headers(boot_token(stack, job_id, 0)))
    assert config.status_code == 200, config.json_body
    _stored_before_the_check(stack, job_id)
    agent = {"Authorization": f"Bearer {config.json_body['agent_token']}", "Content-Type": "application/json"}

    for phase in ("running", "succeeded"):
        body = {"instance_id": "i-run", "phase": phase, **({"exit_code": 0} if phase == "succeeded" else {})}
        answer = client.http.post(f"/agent/{job_id}/status", headers=agent, body=json.dumps(body))
        assert answer.status_code == 200, answer.json_body

    assert get_job(wiring_for(stack), job_id, owner=None).state == JobState.SUCCEEDED.value


def test_its_nodes_credential_renewal_fails_it_naming_the_field(stack: Settings, client: Client) -> None:
    job_id = _submitted(client, stack)
    _launched(stack, job_id, "i-long")
    config = _fetch(client, job_id, "i-long", _boot_headers(boot_token(stack, job_id, 0)))
    assert config.status_code == 200, config.json_body
    _stored_before_the_check(stack, job_id)
    agent = {"Authorization": f"Bearer {config.json_body['agent_token']}", "Content-Type": "application/json"}

    answers = [
        client.http.post(
            f"/agent/{job_id}/storage", headers=agent, body=json.dumps({"instance_id": "i-long"})
        )
        for _ in range(2)
    ]

    for answer in answers:
        assert answer.status_code == 400 and answer.json_body["field"] == FIELD, answer.json_body
    _failed_naming_the_field(stack, job_id)
