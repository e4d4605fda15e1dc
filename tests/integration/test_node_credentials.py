"""What a node's credentials open, through the real API (chalice.test.Client) against moto.

A node boots with a boot token (user-data): one config fetch per node, within the boot window, bound to the
key its agent made at start. The config answer carries the agent token it reports with. Neither opens
another job: not its config, not its run data, not its timeline. (tests/test_template_functions.py shows
the same on the deployed stack: the EC2 user-data, a second fetch refused.)
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from chalice.test import Client

from functions.submit.app import app
from shared.config import Settings
from shared.jobs.planning import plan_job
from shared.jobs.tokens import agent_token, boot_token, check_boot_token, token_hash
from shared.states import JobState
from shared.store.users import create_user
from shared.wiring import wiring_for

TASK = "name: hello\nresources:\n  cpus: 2+\nrun: echo hello\nsecrets:\n  HF_TOKEN: hf_job_secret\n"


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def _submit(client: Client, key: str) -> str:
    answer = client.http.post(
        "/jobs",
        headers={"Authorization": f"Bearer {key}"},
        body=json.dumps({"task": TASK, "filename": "hello.yaml"}),
    )
    assert answer.status_code == 201, answer.json_body
    return answer.json_body["job_id"]


def _launched(stack: Settings, job_id: str, instance_id: str) -> None:
    """Plan, then record a one-node launch the way provision does (PROVISIONING with the token hash)."""
    wiring = wiring_for(stack)
    plan_job({"job_id": job_id, "attempt": 0}, wiring)
    store = wiring.store
    job = store.get(job_id)
    assert job is not None
    token = token_hash(agent_token(stack, job_id, 0))
    assert store.move(job, JobState.PROVISIONING, "provisioning", changes={"token_hash": token})
    cluster = store.new_cluster(
        cluster_id=f"{job_id}-0",
        job_id=job_id,
        attempt=0,
        provider="local",
        cloud="aws",
        region="us-east-1",
        zone=None,
        instance_type="m5.large",
        use_spot=False,
        num_nodes=1,
        state="UP",
        nodes={instance_id: {"rank": 0, "ip": "10.0.0.1", "phase": "launched", "heartbeat_at": time.time()}},
        launched_at=time.time(),
    )
    assert store.move(
        job, JobState.SETTING_UP, "launched", changes={"cluster_id": f"{job_id}-0"}, also_save=[cluster]
    )


def _boot_headers(token: str, node_key: str = "a-node-key-the-agent-made-itself") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Skyless-Node-Key": node_key}


def _fetch(client: Client, job_id: str, instance_id: str, headers: dict[str, str]) -> Any:
    return client.http.get(f"/agent/{job_id}/config?instance_id={instance_id}", headers=headers)


@pytest.fixture
def two_jobs(stack: Settings, client: Client) -> dict[str, str]:
    """Alice's job A on node i-a and Bob's job B on node i-b, both launched, neither node booted yet."""
    job_a = _submit(client, create_user("alice", stack))
    job_b = _submit(client, create_user("bob", stack))
    _launched(stack, job_a, "i-a")
    _launched(stack, job_b, "i-b")
    return {"a": job_a, "b": job_b}


def test_a_nodes_boot_token_opens_neither_another_jobs_config_nor_its_run_data(
    stack: Settings, client: Client, two_jobs: dict[str, str]
) -> None:
    job_a, job_b = two_jobs["a"], two_jobs["b"]
    boot_a = _boot_headers(boot_token(stack, job_a, 0))

    assert _fetch(client, job_b, "i-b", boot_a).status_code == 401
    assert _fetch(client, job_b, "i-a", boot_a).status_code == 401
    for path in (f"/jobs/{job_b}", f"/jobs/{job_b}/logs", "/jobs"):
        assert client.http.get(path, headers=boot_a).status_code == 401, path
    # ... and Bob's node still gets its own config afterwards: nothing of B was claimed by A's attempts
    assert _fetch(client, job_b, "i-b", _boot_headers(boot_token(stack, job_b, 0))).status_code == 200


def test_a_nodes_agent_token_opens_nothing_of_another_job(
    stack: Settings, client: Client, two_jobs: dict[str, str]
) -> None:
    job_a, job_b = two_jobs["a"], two_jobs["b"]
    config_a = _fetch(client, job_a, "i-a", _boot_headers(boot_token(stack, job_a, 0)))
    assert config_a.status_code == 200
    agent_a = {
        "Authorization": f"Bearer {config_a.json_body['agent_token']}",
        "Content-Type": "application/json",
    }

    assert _fetch(client, job_b, "i-b", agent_a).status_code == 401
    report = client.http.post(
        f"/agent/{job_b}/status",
        headers=agent_a,
        body=json.dumps({"instance_id": "i-b", "phase": "failed", "exit_code": 1}),
    )
    assert report.status_code == 401
    for path in (f"/jobs/{job_b}", f"/jobs/{job_b}/logs"):
        assert client.http.get(path, headers=agent_a).status_code == 401, path
    # the agent token is for reports only: it does not fetch configs either, not even its own job's
    assert _fetch(client, job_a, "i-a", {**agent_a, "X-Skyless-Node-Key": "x" * 32}).status_code == 401


def test_the_presigned_log_upload_of_one_job_is_signed_for_that_nodes_log_prefix_only(
    stack: Settings, client: Client, two_jobs: dict[str, str]
) -> None:
    job_a, job_b = two_jobs["a"], two_jobs["b"]
    upload = _fetch(client, job_a, "i-a", _boot_headers(boot_token(stack, job_a, 0))).json_body["log_upload"]
    assert upload["key_prefix"].startswith(f"runs/{job_a}/logs/0/")

    def post(key: str) -> int:
        form = {**upload["fields"], "key": key}
        return httpx.post(upload["url"], data=form, files={"file": ("x.log", b"hi")}).status_code

    assert post(upload["key_prefix"] + "00000000.log") < 300
    # S3 refuses a key outside the signed policy's conditions; moto does not check them, so read what
    # was signed: the key must start with this node's log prefix, and the form expires.
    policy = json.loads(base64.b64decode(upload["fields"]["policy"]))
    assert ["starts-with", "$key", upload["key_prefix"]] in policy["conditions"]
    assert not f"runs/{job_b}/task.json".startswith(upload["key_prefix"])
    assert policy["expiration"]


def test_the_boot_token_buys_one_config_per_node_and_the_same_agent_may_ask_again(
    stack: Settings, client: Client, two_jobs: dict[str, str]
) -> None:
    job_a = two_jobs["a"]
    token = boot_token(stack, job_a, 0)
    first = _fetch(client, job_a, "i-a", _boot_headers(token, "the-real-agents-key-0123456789"))
    assert first.status_code == 200
    assert first.json_body["envs"]["HF_TOKEN"] == "hf_job_secret"  # secrets come over HTTPS, from here only

    someone_else = _fetch(client, job_a, "i-a", _boot_headers(token, "read-from-user-data-later-0000"))
    assert someone_else.status_code == 401
    assert "hf_job_secret" not in json.dumps(someone_else.json_body)
    no_key = client.http.get(
        f"/agent/{job_a}/config?instance_id=i-a", headers={"Authorization": f"Bearer {token}"}
    )
    assert no_key.status_code == 401
    # the agent whose answer was lost on the way asks again with its own key: answered, same token
    again = _fetch(client, job_a, "i-a", _boot_headers(token, "the-real-agents-key-0123456789"))
    assert again.status_code == 200 and again.json_body["agent_token"] == first.json_body["agent_token"]


def test_a_boot_token_expires_with_its_window_and_with_its_attempt(
    stack: Settings, client: Client, two_jobs: dict[str, str]
) -> None:
    job_a = two_jobs["a"]
    stale = boot_token(stack, job_a, 0, now=time.time() - 7200)  # made two hours ago: window closed
    assert not check_boot_token(stack, job_a, 0, stale)
    assert _fetch(client, job_a, "i-a", _boot_headers(stale)).status_code == 401
    assert not check_boot_token(stack, job_a, 1, boot_token(stack, job_a, 0))  # another attempt's
    forged = boot_token(stack, job_a, 0).rsplit(".", 1)[0] + "." + "0" * 64
    assert _fetch(client, job_a, "i-a", _boot_headers(forged)).status_code == 401
    longer = boot_token(stack, job_a, 0).split(".")
    longer[2] = str(int(longer[2]) + 86400)  # a window stretched by hand no longer matches its MAC
    assert _fetch(client, job_a, "i-a", _boot_headers(".".join(longer))).status_code == 401
