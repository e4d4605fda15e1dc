"""The dashboard's clusters pages and the named clusters on the cost page and in `GET /costs`, through
Chalice's test client, with two users: each sees only their own clusters, another user's cluster page is
a 404, and a named cluster's cost is counted where the jobs' cost is."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chalice.test import Client
from test_dashboard_pages import Browser, text

from functions.submit.app import app
from shared.config import Settings
from shared.store.users import create_user

TASK = "name: dev\nresources:\n  cpus: 2+\n  autostop: 30m\nrun: echo hi\n"


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def launch(client: Client, key: str, name: str) -> None:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    answer = client.http.post(f"/clusters/{name}/launch", headers=headers, body=json.dumps({"task": TASK}))
    assert answer.status_code == 201, answer.body


def test_each_user_sees_their_own_clusters_with_state_autostop_cost_and_jobs(
    client: Client, stack: Settings
) -> None:
    alice, bob = create_user("alice", stack), create_user("bob", stack)
    launch(client, alice, "dev")
    launch(client, bob, "bobs-box")

    browser = Browser(client)
    browser.sign_in(alice)
    listing = text(browser.get("/dashboard/clusters"))
    assert 'href="/dashboard/clusters/dev"' in listing and "INIT" in listing and "30m" in listing
    assert "bobs-box" not in listing
    detail = browser.get("/dashboard/clusters/dev")
    assert detail.status_code == 200
    page = text(detail)
    assert 'id="cluster-jobs"' in page and "echo hi" in page and 'id="cost"' in page
    assert browser.get("/dashboard/clusters/bobs-box").status_code == 404  # bob's: as if it did not exist
    costs = text(browser.get("/dashboard/costs"))
    assert 'id="named-clusters"' in costs and "/dashboard/clusters/dev" in costs and "bobs-box" not in costs

    other = Browser(client)
    other.sign_in(bob)
    assert "bobs-box" in text(other.get("/dashboard/clusters")) and "/clusters/dev" not in text(
        other.get("/dashboard/clusters")
    )
    assert other.get("/dashboard/clusters/dev").status_code == 404


def test_the_cost_report_counts_named_clusters_apart_and_only_the_callers(
    client: Client, stack: Settings
) -> None:
    alice, bob = create_user("alice", stack), create_user("bob", stack)
    launch(client, alice, "dev")
    launch(client, bob, "bobs-box")
    answer = client.http.get("/costs", headers={"Authorization": f"Bearer {alice}"})
    assert answer.status_code == 200, answer.body
    report = json.loads(answer.body)
    assert [(c["name"], c["state"]) for c in report["clusters"]] == [("dev", "INIT")]
    assert report["clusters_cost"] == sum(c["cost"] for c in report["clusters"])


def test_an_admins_cost_report_lists_every_users_named_clusters_with_their_owner(
    client: Client, stack: Settings
) -> None:
    alice, bob = create_user("alice", stack), create_user("bob", stack)
    admin = create_user("root", stack, admin=True)
    launch(client, alice, "dev")
    launch(client, bob, "bobs-box")
    answer = client.http.get("/costs?all_users=true", headers={"Authorization": f"Bearer {admin}"})
    assert answer.status_code == 200, answer.body
    clusters = {c["name"]: c["owner"] for c in json.loads(answer.body)["clusters"]}
    assert set(clusters) == {"dev", "bobs-box"} and clusters["dev"] != clusters["bobs-box"]
    refused = client.http.get("/costs?all_users=true", headers={"Authorization": f"Bearer {alice}"})
    assert refused.status_code == 403
