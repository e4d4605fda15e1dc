"""The API through Chalice's test client against moto's server: users' routes and agents' routes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from chalice.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.submit.app import app
from shared.config import Settings
from shared.jobs.agent_reports import PHASES
from shared.jobs.planning import plan_job
from shared.jobs.tokens import agent_token, boot_token, token_hash
from shared.states import JobState
from shared.store.users import create_user
from shared.wiring import wiring_for

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
TASK = "name: hello\nresources:\n  cpus: 2+\nrun: echo hello from $SKYPILOT_NODE_RANK\n"


class Api:
    """One user's view of the API through the Chalice test client."""

    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def get(self, path: str) -> Any:
        return self.client.http.get(path, headers=self.headers)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.http.post(path, headers=self.headers, body=json.dumps(body or {}))

    def submit(self, task: str = TASK, **extra: Any) -> str:
        answer = self.post("/jobs", {"task": task, "filename": "hello.yaml", **extra})
        assert answer.status_code == 201, answer.json_body
        return answer.json_body["job_id"]


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


@pytest.fixture
def alice(client: Client, stack: Settings) -> Api:
    return Api(client, create_user("alice", stack))


@pytest.fixture
def bob(client: Client, stack: Settings) -> Api:
    return Api(client, create_user("bob", stack))


def _queued(settings: Settings, kind: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url)
    url = sqs.get_queue_url(QueueName=settings.queue_name(kind))["QueueUrl"]
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [json.loads(m["Body"]) for m in answer.get("Messages", [])]


def test_submit_records_a_planned_job_and_asks_for_its_launch(stack: Settings, alice: Api) -> None:
    answer = alice.post("/jobs", {"task": TASK, "filename": "hello.yaml", "env": {"A": "1"}})

    assert answer.status_code == 201
    job_id = answer.json_body["job_id"]
    assert answer.json_body["state"] == "PLANNED"  # planned at submit: no optimize hop
    assert _queued(stack, "optimize") == []
    assert _queued(stack, "provision") == [{"job_id": job_id, "attempt": 0, "action": "launch"}]
    shown = alice.get(f"/jobs/{job_id}").json_body
    assert shown["name"] == "hello"
    assert shown["state"] == "PLANNED"
    assert [e["state"] for e in shown["timeline"]] == ["PLANNED"]


def test_a_task_sent_as_json_is_the_same_as_yaml_text(alice: Api) -> None:
    job_id = alice.submit({"name": "as-json", "run": "echo hi", "resources": {"cpus": "2+"}})

    assert alice.get(f"/jobs/{job_id}").json_body["name"] == "as-json"


def test_an_invalid_task_is_400_and_records_nothing(alice: Api) -> None:
    answer = alice.post(
        "/jobs", {"task": "run: echo\nresources:\n  accelerators: Z900:8\n", "filename": "t.yaml"}
    )

    assert answer.status_code == 400
    assert answer.json_body["file"] == "t.yaml"
    assert alice.get("/jobs").json_body == {"jobs": [], "cursor": None}


def test_each_user_lists_only_their_own_jobs(alice: Api, bob: Api) -> None:
    alice_jobs = {alice.submit(), alice.submit()}
    bob_jobs = {bob.submit()}

    assert {j["job_id"] for j in alice.get("/jobs").json_body["jobs"]} == alice_jobs
    assert {j["job_id"] for j in bob.get("/jobs").json_body["jobs"]} == bob_jobs


def test_another_users_job_is_404_to_show_cancel_and_read(alice: Api, bob: Api) -> None:
    job_id = alice.submit()

    assert bob.get(f"/jobs/{job_id}").status_code == 404
    assert bob.post(f"/jobs/{job_id}/cancel").status_code == 404
    assert bob.get(f"/jobs/{job_id}/logs").status_code == 404
    assert alice.get(f"/jobs/{job_id}").json_body["state"] == "PLANNED"


def test_an_unknown_job_id_is_404_and_an_absurd_one_400(alice: Api) -> None:
    assert alice.get("/jobs/job-nope").status_code == 404
    assert alice.get("/jobs/job-nope").json_body["field"] == "job_id"
    absurd = alice.get("/jobs/" + "x" * 5000)  # refused before any lookup (path parameters are bounded)
    assert absurd.status_code == 400 and absurd.json_body["field"] == "job_id"


def test_show_has_the_plan_and_the_place_once_planned(stack: Settings, alice: Api) -> None:
    job_id = alice.submit()
    assert plan_job({"job_id": job_id, "attempt": 0}, wiring_for(stack)) == "already_done"  # planned already

    shown = alice.get(f"/jobs/{job_id}").json_body
    assert shown["state"] == "PLANNED"
    chosen = shown["plan"]["tasks"][0]["candidates"][0]
    assert (shown["cloud"], shown["region"], shown["instance_type"]) == (
        chosen["cloud"],
        chosen["region"],
        chosen["instance_type"],
    )
    assert [e["state"] for e in shown["timeline"]] == ["PLANNED"]
    listed = alice.get("/jobs").json_body["jobs"][0]
    assert listed["cloud"] == chosen["cloud"]


def test_cancel_is_idempotent_and_a_finished_job_is_409(stack: Settings, alice: Api) -> None:
    job_id = alice.submit()

    first = alice.post(f"/jobs/{job_id}/cancel")
    second = alice.post(f"/jobs/{job_id}/cancel")
    assert first.status_code == second.status_code == 200
    assert first.json_body["state"] == second.json_body["state"] == "CANCELLED"

    other = alice.submit()
    store = wiring_for(stack).store
    job = store.get(other)
    assert job is not None and store.move(job, JobState.FAILED, "failed for the test")
    refused = alice.post(f"/jobs/{other}/cancel")
    assert refused.status_code == 409
    assert refused.json_body["error"] == "ConflictError"


def test_logs_read_from_a_cursor_and_say_when_finished(stack: Settings, alice: Api) -> None:
    job_id = alice.submit()
    objects = wiring_for(stack).objects
    objects.put_text(f"runs/{job_id}/logs/0/000-000001", "line one\n")
    objects.put_text(f"runs/{job_id}/logs/1/000-000001", "other rank\n")

    first = alice.get(f"/jobs/{job_id}/logs?rank=0").json_body
    assert first["text"] == "line one\n"
    assert first["finished"] is False
    objects.put_text(f"runs/{job_id}/logs/0/000-000002", "line two\n")
    second = alice.get(f"/jobs/{job_id}/logs?rank=0&after={first['cursor']}").json_body
    assert second["text"] == "line two\n"
    assert alice.get(f"/jobs/{job_id}/logs?rank=1").json_body["text"] == "other rank\n"

    alice.post(f"/jobs/{job_id}/cancel")
    last = alice.get(f"/jobs/{job_id}/logs?rank=0&after={second['cursor']}").json_body
    assert last == {**last, "text": "", "finished": True}


def test_a_cursor_of_another_job_is_400(alice: Api) -> None:
    job_id = alice.submit()

    answer = alice.get(f"/jobs/{job_id}/logs?after=runs/other/logs/0/000-000001")
    assert answer.status_code == 400
    assert answer.json_body["field"] == "after"


def test_plan_is_a_dry_run_that_records_nothing(alice: Api) -> None:
    answer = alice.post("/plan", {"task": TASK, "clouds": ["aws"], "minimize": "cost"})

    assert answer.status_code == 200
    candidates = answer.json_body["tasks"][0]["candidates"]
    assert candidates and {c["cloud"] for c in candidates} == {"aws"}
    prices = [c["hourly_price"] for c in candidates]
    assert prices[0] == min(prices)
    assert alice.get("/jobs").json_body == {"jobs": [], "cursor": None}


def test_a_plan_nothing_can_satisfy_is_400(alice: Api) -> None:
    answer = alice.post("/plan", {"task": "resources:\n  cpus: 100000\nrun: echo\n"})

    assert answer.status_code == 400
    assert answer.json_body["error"] == "NoOfferingError"


@pytest.mark.parametrize(
    "task",
    [
        "resources:\n  cpus: 100000\nrun: echo\n",
        "resources:\n  cloud: aws\n  accelerators: TPU-v4-8\nrun: echo\n",
        "name: p\nexecution: parallel\ntasks:\n- name: a\n  run: echo\n- name: b\n  resources:\n"
        "    memory: 99999\n  run: echo\n",
    ],
)
def test_a_submission_nothing_can_run_is_refused_with_the_dry_runs_error_and_records_nothing(
    alice: Api, task: str
) -> None:
    """Submit checks for a place at the first candidate of each task, not the dry run's whole list: the
    answer is the same error, located the same way."""
    dry = alice.post("/plan", {"task": task, "filename": "t.yaml"})
    submitted = alice.post("/jobs", {"task": task, "filename": "t.yaml"})
    assert dry.status_code == submitted.status_code == 400
    assert submitted.json_body == dry.json_body
    assert alice.get("/jobs").json_body == {"jobs": [], "cursor": None}


def test_submit_asks_the_optimizer_for_one_candidate_per_task_before_the_jobs_own_plan(
    alice: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shared.optimizer

    asked: list[int | None] = []
    original = shared.optimizer.plan_pipeline

    def counted(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("max_candidates"))
        return original(*args, **kwargs)

    monkeypatch.setattr(shared.optimizer, "plan_pipeline", counted)
    job_id = alice.submit()
    assert alice.get(f"/jobs/{job_id}").json_body["state"] == JobState.PLANNED
    assert asked[0] == 1 and len(asked) == 2  # the check, then the job's plan (its whole failover list)
    assert asked[1] is not None and asked[1] > 1


def test_upload_gives_a_working_presigned_put_that_a_job_can_use(
    stack: Settings, alice: Api, bob: Api
) -> None:
    answer = alice.post("/uploads", {"filename": "workdir.tar.gz", "size_bytes": 5})
    assert answer.status_code == 201
    key, url = answer.json_body["key"], answer.json_body["url"]

    assert httpx.put(url, content=b"hello").status_code == 200
    s3 = boto3.client("s3", region_name=stack.region, endpoint_url=stack.endpoint_url)
    assert s3.get_object(Bucket=stack.bucket, Key=key)["Body"].read() == b"hello"
    assert alice.submit(workdir_key=key)
    stolen = bob.post("/jobs", {"task": TASK, "workdir_key": key})
    assert stolen.status_code == 400
    assert stolen.json_body["field"] == "workdir_key"


def test_an_upload_over_the_size_limit_is_refused(alice: Api) -> None:
    answer = alice.post("/uploads", {"size_bytes": 10 * 1024**3})

    assert answer.status_code == 400
    assert answer.json_body["field"] == "size_bytes"


def _launched(stack: Settings, job_id: str, instances: list[str]) -> str:
    """Plan the job, then record a launch the way the provisioner does; answer the agents' token."""
    wiring = wiring_for(stack)
    plan_job({"job_id": job_id, "attempt": 0}, wiring)
    store = wiring.store
    job = store.get(job_id)
    assert job is not None
    token = agent_token(stack, job_id, 0)
    assert store.move(job, JobState.PROVISIONING, "provisioning", changes={"token_hash": token_hash(token)})
    cluster_id = f"{job_id}-a0"
    now = time.time()
    cluster = store.new_cluster(
        cluster_id=cluster_id, job_id=job_id, attempt=0, provider="local", cloud="aws", region="us-east-1",
        zone=None, instance_type="m5.large", use_spot=False, num_nodes=len(instances), state="UP",
        nodes={iid: {"rank": r, "ip": f"10.0.0.{r + 1}", "phase": "launched", "heartbeat_at": now}
               for r, iid in enumerate(instances)},
        launched_at=now,
    )  # fmt: skip
    assert store.move(
        job, JobState.SETTING_UP, "launched", changes={"cluster_id": cluster_id}, also_save=[cluster]
    )
    return token


def _agent(client: Client, token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def _booting(stack: Settings, job_id: str, node_key: str = "the-agents-own-node-key") -> dict[str, str]:
    """What a node agent sends for its config: the boot token from user-data and a key of its own."""
    return {"Authorization": f"Bearer {boot_token(stack, job_id, 0)}", "X-Skyless-Node-Key": node_key}


def test_agent_gets_its_config_with_the_job_token(stack: Settings, client: Client, alice: Api) -> None:
    job_id = alice.submit()
    token = _launched(stack, job_id, ["i-a", "i-b"])

    answer = client.http.get(f"/agent/{job_id}/config?instance_id=i-b", headers=_booting(stack, job_id))

    assert answer.status_code == 200, answer.json_body
    config = answer.json_body
    assert (config["rank"], config["num_nodes"]) == (1, 2)
    assert config["node_ips"] == ["10.0.0.1", "10.0.0.2"]
    assert config["run"].startswith("echo hello")
    assert config["log_upload"]["key_prefix"].startswith(f"runs/{job_id}/logs/1/")
    assert config["agent_token"] == token


def test_agent_routes_refuse_another_jobs_token_and_a_users_key(
    stack: Settings, client: Client, alice: Api
) -> None:
    job_id, other_id = alice.submit(), alice.submit()
    _launched(stack, job_id, ["i-a"])
    other_token = _launched(stack, other_id, ["i-z"])

    wrong_job = client.http.get(
        f"/agent/{job_id}/config?instance_id=i-a", headers=_agent(client, other_token)
    )
    user_key = client.http.get(f"/agent/{job_id}/config?instance_id=i-a", headers=alice.headers)
    assert wrong_job.status_code == user_key.status_code == 401


def test_agent_config_is_404_for_a_stranger_instance_and_400_without_one(
    stack: Settings, client: Client, alice: Api
) -> None:
    job_id = alice.submit()
    _launched(stack, job_id, ["i-a"])
    boot = _booting(stack, job_id)

    assert client.http.get(f"/agent/{job_id}/config?instance_id=i-q", headers=boot).status_code == 404
    missing = client.http.get(f"/agent/{job_id}/config", headers=boot)
    assert missing.status_code == 400
    assert missing.json_body["field"] == "instance_id"


def test_agent_reports_move_the_job_to_running_then_succeeded(
    stack: Settings, client: Client, alice: Api
) -> None:
    job_id = alice.submit()
    token = _launched(stack, job_id, ["i-a"])

    def report(body: dict[str, Any]) -> Any:
        return client.http.post(
            f"/agent/{job_id}/status", headers=_agent(client, token), body=json.dumps(body)
        )

    assert report({"instance_id": "i-a", "phase": "running"}).json_body["state"] == "RUNNING"
    assert report({"instance_id": "i-a", "phase": "running"}).json_body["state"] == "RUNNING"  # a duplicate
    done = report({"instance_id": "i-a", "phase": "succeeded", "exit_code": 0})
    assert done.status_code == 200
    assert done.json_body["state"] == "SUCCEEDED"
    assert alice.get(f"/jobs/{job_id}").json_body["state"] == "SUCCEEDED"
    bad_phase = report({"instance_id": "i-a", "phase": "exploded"})
    assert bad_phase.status_code == 422
    assert bad_phase.json_body["field"] == "phase"


def test_agent_config_is_425_until_the_cluster_is_recorded(
    stack: Settings, client: Client, alice: Api
) -> None:
    job_id = alice.submit()
    wiring = wiring_for(stack)
    plan_job({"job_id": job_id, "attempt": 0}, wiring)
    job = wiring.store.get(job_id)
    assert job is not None
    token = agent_token(stack, job_id, 0)
    assert wiring.store.move(
        job, JobState.PROVISIONING, "provisioning", changes={"token_hash": token_hash(token)}
    )

    early = client.http.get(f"/agent/{job_id}/config?instance_id=i-a", headers=_booting(stack, job_id))

    assert early.status_code == 425
    assert early.json_body["error"] == "NotReadyError"


def test_a_node_made_before_the_running_attempt_is_let_go_waits_for_its_attempt(
    stack: Settings, client: Client, alice: Api
) -> None:
    job_id = alice.submit()
    _launched(stack, job_id, ["i-a"])  # attempt 0 runs
    key = {"X-Skyless-Node-Key": "the-next-agents-own-key"}

    def ask(attempt: int) -> Any:
        headers = {"Authorization": f"Bearer {boot_token(stack, job_id, attempt)}", **key}
        return client.http.get(f"/agent/{job_id}/config?instance_id=i-next", headers=headers)

    assert ask(1).status_code == 425  # the next attempt's node: not yet, the running one is not fenced
    assert ask(2).status_code == 401  # no attempt beyond the next is ever launched
    assert (
        client.http.get(
            f"/agent/{job_id}/config?instance_id=i-a", headers=_booting(stack, job_id)
        ).status_code
        == 200
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bodies=st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "instance_id": st.sampled_from(["i-a", "i-b", "i-stranger"]),
                    "phase": st.sampled_from(PHASES),
                },
                optional={"exit_code": st.integers(-300, 300), "message": st.text(max_size=50)},
            ),
            st.dictionaries(st.sampled_from(["instance_id", "phase", "exit_code", "message"]), JSON_VALUES),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_no_sequence_of_status_reports_is_a_500(
    stack: Settings, client: Client, alice: Api, bodies: list
) -> None:
    job_id = alice.submit()
    token = _launched(stack, job_id, ["i-a", "i-b"])

    for body in bodies:
        answer = client.http.post(
            f"/agent/{job_id}/status", headers=_agent(client, token), body=json.dumps(body)
        )
        assert answer.status_code < 500, (body, answer.json_body)
    assert alice.get(f"/jobs/{job_id}").status_code == 200


def test_importing_the_api_leaves_skyless_logs_audible() -> None:
    """Chalice configures a logger named after the app; ours must not be muted at ERROR by it."""
    import logging

    import functions.submit.app  # noqa: F401

    assert logging.getLogger("skyless.local").getEffectiveLevel() <= logging.WARNING
    assert not logging.getLogger("skyless").handlers
