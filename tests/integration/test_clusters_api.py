"""The cluster routes of the real Chalice app (its test client) against moto: bodies, status codes, who may
see what, and the cluster agents' token. Provisioning is not delivered here (tests/integration/
test_clusters_lifecycle.py does it): a new cluster stays INIT."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from functions.submit.app import app
from shared.clusters.tokens import cluster_agent_token
from shared.config import Settings
from shared.store.users import create_user

TASK = "name: dev\nresources:\n  cpus: 2+\nsetup: echo s\nrun: echo r\n"


class Caller:
    def __init__(self, client: Client, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def get(self, path: str) -> Any:
        return self.client.http.get(path, headers=self.headers)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.http.post(path, headers=self.headers, body=json.dumps(body or {}))


@pytest.fixture
def client(stack: Settings) -> Any:
    with Client(app) as chalice_client:
        yield chalice_client


@pytest.fixture
def alice(client: Client, stack: Settings) -> Caller:
    return Caller(client, create_user("alice", stack))


@pytest.fixture
def bob(client: Client, stack: Settings) -> Caller:
    return Caller(client, create_user("bob", stack))


def test_launch_answers_the_cluster_and_its_first_job_and_a_second_launch_queues_behind_it(
    alice: Caller,
) -> None:
    first = alice.post("/clusters/dev/launch", {"task": TASK, "filename": "dev.yaml", "idle_minutes": 10})
    assert first.status_code == 201, first.json_body
    body = first.json_body
    assert body["action"] == "created" and body["job"]["job"] == 1 and body["job"]["with_setup"] is True
    assert body["cluster"]["state"] == "INIT" and body["cluster"]["autostop"] == "10m"
    second = alice.post("/clusters/dev/launch", {"task": TASK, "fast": True})
    assert second.json_body["action"] == "provisioning" and second.json_body["job"]["job"] == 2
    assert second.json_body["job"]["with_setup"] is False
    queue = alice.get("/clusters/dev/queue").json_body
    assert [(j["job"], j["state"]) for j in queue["jobs"]] == [(2, "PENDING"), (1, "PENDING")]
    listed = alice.get("/clusters").json_body["clusters"]
    assert [(c["name"], c["state"], c["active_jobs"]) for c in listed] == [("dev", "INIT", 2)]
    detail = alice.get("/clusters/dev").json_body
    assert detail["timeline"][0]["message"].startswith("INIT: launching dev from dev.yaml")


def test_exec_needs_an_up_cluster_and_a_task_or_a_command(alice: Caller) -> None:
    assert alice.post("/clusters/dev/exec", {"command": "true"}).status_code == 404
    alice.post("/clusters/dev/launch", {"task": TASK})
    refused = alice.post("/clusters/dev/exec", {"command": "true"})
    assert refused.status_code == 409 and "exec needs it UP" in refused.json_body["message"]
    neither = alice.post("/clusters/dev/exec", {})
    assert neither.status_code == 400 and neither.json_body["field"] == "task"


def test_bad_names_bodies_and_numbers_are_4xx_naming_the_field(alice: Caller) -> None:
    bad_name = alice.post("/clusters/9x/launch", {"task": TASK})
    assert bad_name.status_code == 400 and bad_name.json_body["field"] == "cluster"
    unknown_field = alice.post("/clusters/dev/launch", {"task": TASK, "idle": 3})
    assert unknown_field.status_code == 422 and unknown_field.json_body["field"] == "idle"
    bad_task = alice.post("/clusters/dev/launch", {"task": "run: [unclosed\n"})
    assert bad_task.status_code == 400 and bad_task.json_body["line"] is not None
    alice.post("/clusters/dev/launch", {"task": TASK})
    bad_number = alice.get("/clusters/dev/jobs/x1/logs")
    assert bad_number.status_code == 400 and bad_number.json_body["field"] == "job"
    assert alice.get("/clusters/dev/jobs/7/logs").status_code == 404
    negative = alice.post("/clusters/dev/autostop", {"idle_minutes": -5})
    assert negative.status_code == 422


def test_a_user_sees_and_touches_only_their_own_clusters(alice: Caller, bob: Caller) -> None:
    alice.post("/clusters/dev/launch", {"task": TASK})
    assert bob.get("/clusters").json_body["clusters"] == []
    for path in ("/clusters/dev", "/clusters/dev/queue"):
        assert bob.get(path).status_code == 404
    assert bob.post("/clusters/dev/down").status_code == 404
    mine = bob.post("/clusters/dev/launch", {"task": TASK})  # the same name is bob's own cluster
    assert mine.status_code == 201 and mine.json_body["job"]["job"] == 1
    assert mine.json_body["cluster"]["cluster_id"] != alice.get("/clusters/dev").json_body["cluster_id"]


def test_down_twice_is_harmless_and_then_the_name_is_taken_again_by_a_new_cluster(
    alice: Caller, stack: Settings
) -> None:
    from shared.clusters.provisioning import cluster_step

    first = alice.post("/clusters/dev/launch", {"task": TASK}).json_body["cluster"]["cluster_id"]
    assert alice.post("/clusters/dev/down").json_body["state"] == "TERMINATING"
    assert alice.post("/clusters/dev/down").json_body["state"] == "TERMINATING"
    assert cluster_step({"cluster": first, "action": "down"}) == "done"
    assert cluster_step({"cluster": first, "action": "down"}) == "already_done"
    assert alice.get("/clusters/dev").status_code == 404
    again = alice.post("/clusters/dev/launch", {"task": TASK}).json_body
    assert again["action"] == "created" and again["cluster"]["cluster_id"] != first
    queue = alice.get("/clusters/dev/queue").json_body["jobs"]
    assert [j["job"] for j in queue] == [1]  # a new cluster, a new queue


def test_cluster_agents_need_their_clusters_token(client: Client, alice: Caller, stack: Settings) -> None:
    key = alice.post("/clusters/dev/launch", {"task": TASK}).json_body["cluster"]["cluster_id"]
    body = {"instance_id": "i-1", "have": [], "running": [], "sessions": 0}
    stranger = Caller(client, "not-the-token").post(f"/cluster-agent/{key}/poll", body)
    assert stranger.status_code == 401
    other = Caller(client, cluster_agent_token(stack, "cl-000000000000")).post(
        f"/cluster-agent/{key}/poll", body
    )
    assert other.status_code == 401
    agent = Caller(client, cluster_agent_token(stack, key))
    answer = agent.post(f"/cluster-agent/{key}/poll", body)
    assert (
        answer.status_code == 200 and answer.json_body["state"] == "INIT" and answer.json_body["start"] == []
    )
    report = agent.post(f"/cluster-agent/{key}/jobs/1/status", {"instance_id": "i-1", "phase": "running"})
    assert report.status_code == 404  # not a node that runs job 1
    bad_phase = agent.post(f"/cluster-agent/{key}/jobs/1/status", {"instance_id": "i-1", "phase": "done"})
    assert bad_phase.status_code == 422


def test_launch_says_what_of_the_task_skyless_does_not_act_on(alice: Caller) -> None:
    task = "resources:\n  autostop:\n    idle_minutes: 5\n    wait_for: none\n    hook: echo bye\nrun: x\n"
    notes = alice.post("/clusters/dev/launch", {"task": task}).json_body["notes"]
    assert any("wait_for: none is not honoured" in n for n in notes)
    assert any("hook is not run" in n for n in notes)
    assert not any("read, not applied" in n for n in notes)  # the cluster applies its autostop


def test_a_node_trades_its_boot_token_for_the_agent_token_once(
    client: Client, alice: Caller, stack: Settings, queues: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from functions.provision.handler import handler as provision_handler
    from shared.clusters.tokens import cluster_boot_token

    monkeypatch.setenv(
        "SKYLESS_LOCAL_AGENT_COMMAND", json.dumps([sys.executable, "-c", "import time; time.sleep(60)"])
    )
    key = alice.post("/clusters/dev/launch", {"task": TASK}).json_body["cluster"]["cluster_id"]
    boot = cluster_boot_token(stack, key)

    def claim(token: str, node_key: str, instance_id: str) -> Any:
        headers = {"Authorization": f"Bearer {token}", "X-Skyless-Node-Key": node_key,
                   "Content-Type": "application/json"}  # fmt: skip
        return client.http.post(f"/cluster-agent/{key}/claim", headers=headers,
                                body=json.dumps({"instance_id": instance_id}))  # fmt: skip

    mine, theirs = "a" * 32, "b" * 32
    assert claim(boot, mine, "i-1").status_code == 425  # INIT: the nodes are not recorded yet
    assert claim("boot.0.9999999999.forged", mine, "i-1").status_code == 401
    assert claim(boot, "short", "i-1").status_code == 401
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    node = alice.get("/clusters/dev").json_body["nodes"][0]["instance_id"]
    first = claim(boot, mine, node)
    assert first.status_code == 200 and first.json_body["agent_token"] == cluster_agent_token(stack, key)
    assert claim(boot, mine, node).status_code == 200  # the same agent again (its answer was lost)
    assert claim(boot, theirs, node).status_code == 401  # anyone else with the boot token: refused
    assert claim(boot, mine, "i-other").status_code == 404
    expired = cluster_boot_token(stack, key).split(".")
    expired[2] = "1"
    assert claim(".".join(expired), mine, node).status_code == 401


def test_buckets_in_file_mounts_are_refused_on_clusters_naming_the_field(alice: Caller) -> None:
    for source in ("gs://my-bucket/data", "{name: ckpt, store: s3, mode: MOUNT}"):
        task = f"file_mounts:\n  /data: {source}\nrun: ls /data\n"
        answer = alice.post("/clusters/dev/launch", {"task": task, "filename": "t.yaml"})
        assert answer.status_code == 400, answer.json_body
        assert (
            answer.json_body["field"] == "file_mounts./data"
            and "named clusters" in answer.json_body["message"]
        )
    assert alice.get("/clusters").json_body["clusters"] == []  # nothing was made


SECRET_TASK = "name: dev\nresources:\n  cpus: 2+\nsecrets:\n  HF_TOKEN: null\nrun: echo r\n"


def test_null_secrets_need_values_on_launch_and_exec_and_the_values_stay_out_of_every_table(
    alice: Caller, stack: Settings
) -> None:
    from secret_leaks import table_items_holding

    refused = alice.post("/clusters/dev/launch", {"task": SECRET_TASK, "filename": "dev.yaml"})
    assert refused.status_code == 400 and refused.json_body["field"] == "secrets.HF_TOKEN", refused.json_body
    assert refused.json_body["line"] == 5 and refused.json_body["file"] == "dev.yaml"
    value = "hf_cluster_value_6d1c"
    launched = alice.post("/clusters/dev/launch", {"task": SECRET_TASK, "secrets": {"HF_TOKEN": value}})
    assert launched.status_code == 201, launched.json_body
    exec_refused = alice.post("/clusters/dev/exec", {"task": SECRET_TASK})
    assert exec_refused.status_code in (400, 409), exec_refused.json_body  # no value (or not UP yet)
    assert holds_nothing(alice.get("/clusters/dev").json_body, value)
    assert table_items_holding(str(stack.endpoint_url), stack.region, stack.prefix, value) == []


def holds_nothing(answer: Any, value: str) -> bool:
    return value not in json.dumps(answer)


def test_a_container_task_is_refused_on_a_cluster_naming_the_field_and_its_line(alice: Caller) -> None:
    task = "name: dev\nresources:\n  cpus: 2+\n  image_id: docker:python:3.11-slim\nrun: echo r\n"
    refused = alice.post("/clusters/dev/launch", {"task": task, "filename": "dev.yaml"})
    assert refused.status_code == 400, refused.json_body
    body = refused.json_body
    assert (body["field"], body["file"], body["line"]) == ("resources.image_id", "dev.yaml", 4)
    assert "not yet on named clusters" in body["message"]
    assert alice.get("/clusters").json_body["clusters"] == []  # nothing was made


def test_a_clusters_open_ports_are_its_launch_tasks_and_only_its_owner_sees_them(
    alice: Caller, bob: Caller
) -> None:
    web = "name: web\nresources:\n  cpus: 2+\n  ports: [8080, 9000-9001]\nrun: echo r\n"
    assert alice.post("/clusters/web/launch", {"task": web}).status_code == 201
    assert alice.get("/clusters/web").json_body["ports"] == ["8080", "9000-9001"]
    later = web.replace("[8080, 9000-9001]", "9999")
    assert alice.post("/clusters/web/launch", {"task": later}).status_code == 201  # queued on the same nodes
    assert alice.get("/clusters/web").json_body["ports"] == ["8080", "9000-9001"]  # it opens no new port

    assert bob.get("/clusters/web").status_code == 404
    assert bob.post("/clusters/web/launch", {"task": TASK}).status_code == 201  # bob's own "web"
    assert bob.get("/clusters/web").json_body["ports"] == []
    assert alice.get("/clusters/web").json_body["ports"] == ["8080", "9000-9001"]
