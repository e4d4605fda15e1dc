"""Live records indexed apart (issue 20), on DynamoDB (moto's server), through what AWS calls: the reconcile
function (its template Handler, a scheduled event) over a stack holding a thousand finished jobs written as
the store writes them reads only the live ones; `GET /jobs?state=RUNNING` finds an old RUNNING job behind
them reading a page; a stack made before the live index is upgraded (indexes, TTL, backfill) so no live job
drops out of the sweeps. Items read are counted at pynamodb's one door to DynamoDB."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from chalice.test import Client
from history import seed_dynamo
from pynamodb.connection.base import Connection
from typer.testing import CliRunner

from cli.main import app as cli
from functions.reconcile.handler import handler as reconcile_handler
from functions.submit.app import app
from shared.aws.sessions import aws_client
from shared.clusters.health import sweep_clusters
from shared.config import Settings
from shared.stack import create_stack
from shared.states import JobState
from shared.store.cluster_records import ClusterStore
from shared.store.jobs import DynamoJobStore
from shared.store.live_index import LIVE_SHARDS
from shared.store.table_upgrades import upgrade_tables
from shared.store.users import create_user, find_user

EVENTS = Path(__file__).resolve().parents[1] / "events"
FINISHED = 1000


@contextlib.contextmanager
def counting_reads() -> Iterator[dict[str, int]]:
    """Items DynamoDB read (a query's or scan's ScannedCount, a get's item) and read requests, meanwhile."""
    counts = {"items": 0, "requests": 0}
    original = Connection._make_api_call

    def counted(self: Connection, operation: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        answer = original(self, operation, kwargs)
        if operation in ("Query", "Scan"):
            counts["items"] += int(answer.get("ScannedCount", answer.get("Count", 0)))
        elif operation == "GetItem":
            counts["items"] += 1 if "Item" in answer else 0
        elif operation == "BatchGetItem":
            counts["items"] += sum(len(items) for items in answer.get("Responses", {}).values())
        else:
            return answer
        counts["requests"] += 1
        return answer

    with mock.patch.object(Connection, "_make_api_call", counted):
        yield counts


def running_job(store: DynamoJobStore, job_id: str, owner: str = "alice") -> Any:
    job = store.new_job(job_id=job_id, owner=owner, state="PENDING", version=0, token_hash="h")
    assert store.create(job, "submitted")
    for to in (JobState.PLANNED, JobState.SETTING_UP, JobState.RUNNING):
        assert store.move(job, to, f"to {to}")
    return job


def scheduled_event() -> dict[str, Any]:
    return json.loads((EVENTS / "scheduled_event.json").read_text())


def test_the_reconcile_function_reads_only_live_records_over_a_thousand_finished_jobs(
    stack: Settings,
) -> None:
    store = DynamoJobStore(stack)
    live = [running_job(store, f"live-{n}") for n in range(2)]
    with counting_reads() as empty_history:
        reconcile_handler(scheduled_event(), None)
    seed_dynamo(stack, FINISHED)
    with counting_reads() as history:
        answer = reconcile_handler(scheduled_event(), None)
    assert answer["actions"] == {}
    assert history == empty_history  # nothing read grows with the history
    assert history["items"] <= len(live) + 1
    assert {j.job_id for j in store.live_jobs()} == {j.job_id for j in live}


def test_a_state_filter_finds_an_old_running_job_behind_a_thousand_finished_ones(stack: Settings) -> None:
    store = DynamoJobStore(stack)
    old = running_job(store, "old-running")
    seed_dynamo(stack, FINISHED, owner="alice")
    headers = {"Authorization": f"Bearer {create_user('alice', stack, user_id='alice')}"}
    with Client(app) as client, counting_reads() as reads:
        answer = client.http.get("/jobs?state=running&limit=20", headers=headers)
    assert answer.status_code == 200, answer.json_body
    assert [j["job_id"] for j in answer.json_body["jobs"]] == [old.job_id]
    assert answer.json_body["cursor"] is None
    jobs_read = reads["items"] - 1  # the caller's user record
    assert jobs_read <= 20 + 1


def test_pages_follow_the_cursor_through_the_api(stack: Settings) -> None:
    seed_dynamo(stack, 25, owner="alice")
    headers = {"Authorization": f"Bearer {create_user('alice', stack, user_id='alice')}"}
    seen: list[str] = []
    path = "/jobs?limit=10"
    with Client(app) as client:
        while True:
            with counting_reads() as reads:
                answer = client.http.get(path, headers=headers)
            assert answer.status_code == 200, answer.json_body
            assert reads["items"] - 1 <= 10 + 1
            seen += [j["job_id"] for j in answer.json_body["jobs"]]
            if answer.json_body["cursor"] is None:
                break
            path = f"/jobs?limit=10&cursor={answer.json_body['cursor']}"
        bad = client.http.get("/jobs?cursor=yesterday", headers=headers)
    assert seen == [f"hist-alice-{n:07d}" for n in reversed(range(25))]
    assert bad.status_code == 400 and "cursor" in json.dumps(bad.json_body)


def test_a_stack_made_before_the_live_index_is_upgraded_and_keeps_its_live_jobs_in_the_sweep(
    moto_endpoint: str, tmp_path: Path
) -> None:
    settings = Settings(prefix=f"t{uuid.uuid4().hex[:10]}", endpoint_url=moto_endpoint, home=tmp_path)
    dynamodb = aws_client("dynamodb", settings)
    dynamodb.create_table(  # the jobs table as the template made it before issue 20
        TableName=settings.table_name("jobs"),
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "job_id", "AttributeType": "S"},
            {"AttributeName": "owner", "AttributeType": "S"},
            {"AttributeName": "created_at", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "owner-index",
                "KeySchema": [
                    {"AttributeName": "owner", "KeyType": "HASH"},
                    {"AttributeName": "created_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    old_item = {
        "job_id": {"S": "job-before-upgrade"}, "owner": {"S": "alice"}, "state": {"S": "RUNNING"},
        "version": {"N": "3"}, "token_hash": {"S": "h"}, "created_at": {"N": "1700000000"},
        "updated_at": {"N": "1700000100"},
    }  # fmt: skip
    dynamodb.put_item(TableName=settings.table_name("jobs"), Item=old_item)
    create_stack(settings)
    store = DynamoJobStore(settings)
    assert [j.job_id for j in store.live_jobs()] == ["job-before-upgrade"]
    assert [j.job_id for j in store.iter_jobs_of("alice", state="RUNNING")] == ["job-before-upgrade"]
    ttl = dynamodb.describe_time_to_live(TableName=settings.table_name("events"))["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    create_stack(settings)  # again: nothing to do, nothing breaks
    with counting_reads() as reads:
        assert upgrade_tables(settings) == {}  # upgraded: no backfill, no history read
    assert reads["items"] == 0


@pytest.mark.parametrize("state", [JobState.SUCCEEDED, JobState.CANCELLED])
def test_a_finished_job_carries_its_expiry_and_leaves_the_live_index(
    stack: Settings, state: JobState
) -> None:
    store = DynamoJobStore(stack)
    job = running_job(store, f"ending-{state.value.lower()}")
    assert store.move(job, state, "ended")
    raw = aws_client("dynamodb", stack).get_item(
        TableName=stack.table_name("jobs"), Key={"job_id": {"S": job.job_id}}
    )["Item"]
    assert "live" not in raw
    assert int(raw["expires_at"]["N"]) - int(float(raw["updated_at"]["N"])) == stack.retention_seconds
    assert raw["owner_state"]["S"] == f"alice#{state.value}"
    assert all(int(e.expires_at) > 0 for e in store.timeline(job.job_id))
    assert store.live_jobs() == []


def named_cluster(store: ClusterStore, name: str, state: str = "STOPPED") -> Any:
    key = f"k{uuid.uuid4().hex[:12]}"
    cluster = store.new_cluster(key=key, owner="alice", name=name, state=state)
    plan = store.new_plan(key, plan_z=b"x", task="{}")
    assert store.create(cluster, plan, store.new_claim("alice", name, key), replacing=None, message="made")
    return cluster


def test_the_named_cluster_sweep_reads_only_clusters_that_are_not_terminated(stack: Settings) -> None:
    store = ClusterStore(stack)
    kept = named_cluster(store, "kept")
    for n in range(150):
        ended = named_cluster(store, f"old-{n}")
        assert store.write_cluster(ended, {"state": "TERMINATED"}, message="torn down")
    with counting_reads() as reads:
        answer = sweep_clusters()
    assert answer == {}
    # the one live cluster, from the live index: one query of each of its shards
    assert reads["items"] == 1 and reads["requests"] == LIVE_SHARDS
    assert [c.key for c in store.live_clusters()] == [kept.key]


def test_skyless_queue_prints_the_cursor_of_the_next_page_and_follows_it(
    stack: Settings, cli_api: list[str]
) -> None:
    user = find_user(cli_api[-1], stack)
    assert user is not None
    seed_dynamo(stack, 7, owner=user.user_id)
    runner = CliRunner()
    first = runner.invoke(cli, ["queue", "--limit", "5", "--json", *cli_api])
    assert first.exit_code == 0, first.output
    assert [j["job_id"] for j in json.loads(first.output)] == [
        f"hist-{user.user_id}-{n:07d}" for n in (6, 5, 4, 3, 2)
    ]
    table = runner.invoke(cli, ["queue", "--limit", "5", *cli_api], env={"COLUMNS": "200"})
    [hint] = [line for line in table.output.splitlines() if line.startswith("More jobs:")]
    cursor = hint.split("--cursor '")[1].split("'")[0]
    rest = runner.invoke(cli, ["queue", "--limit", "5", "--cursor", cursor, "--json", *cli_api])
    assert [j["job_id"] for j in json.loads(rest.output)] == [f"hist-{user.user_id}-{n:07d}" for n in (1, 0)]
    bad = runner.invoke(cli, ["queue", "--cursor", "tomorrow", *cli_api])
    assert bad.exit_code != 0 and "cursor" in bad.output and "Traceback" not in bad.output


def test_the_dashboard_links_to_the_older_jobs_page(stack: Settings) -> None:
    from test_dashboard_pages import Browser

    key = create_user("alice", stack, user_id="alice")
    seed_dynamo(stack, 7, owner="alice")
    with Client(app) as client:
        browser = Browser(client)
        browser.sign_in(key)
        first = browser.get("/dashboard?limit=5")
        body = first.body.decode()
        assert "hist-alice-0000006" in body and "hist-alice-0000001" not in body
        link = body.split('<p class="pager"><a href="')[1].split('"')[0].replace("&amp;", "&")
        older = browser.get(link).body.decode()
    assert "cursor=" in link and "limit=5" in link
    assert (
        "hist-alice-0000001" in older and "hist-alice-0000000" in older and "hist-alice-0000006" not in older
    )
    assert '<p class="pager">' not in older
