"""An admin's view of every user's jobs and clusters (`-u/--all-users`), through the real Chalice app served
over HTTP and the CLI as typed: four users in two teams (alice and carol in `vision`, carol its team admin;
bob and dave in `nlp`) and an admin key. The admin sees each user's jobs and clusters with their owners; a
user, a team admin and a grant holder asking `-u` see only their own, with the note saying why, and the API
answers their `all_users=true` with a 403 naming the field. `-u` on the verbs that change clusters acts on
the caller's own only, an admin's included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import _free_port
from typer.testing import CliRunner, Result

from cli.main import app as cli
from functions.submit.app import app
from local_runtime.api_server import ApiServer
from shared.config import Settings
from shared.store.users import create_user, find_user

WIDE = {"COLUMNS": "260"}
NOTE = "every user's jobs and clusters need an admin key"


@dataclass
class User:
    name: str
    key: str
    user_id: str
    flags: list[str]


@dataclass
class Deployment:
    url: str
    admin: User
    users: dict[str, User]
    jobs: dict[str, str]  # user name -> the id of the job they submitted
    clusters: dict[str, str]  # user name -> the name of the cluster they launched


def run(who: User, *words: str) -> Result:
    return CliRunner().invoke(cli, [*words, *who.flags], env=WIDE)


def api(deployment: Deployment, who: User, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {who.key}"}
    return httpx.request(method, deployment.url + path, headers=headers, timeout=30, **kwargs)


@pytest.fixture
def deployment(stack: Settings) -> Iterator[Deployment]:
    server = ApiServer(app, "127.0.0.1", _free_port())
    server.start()
    try:

        def user(name: str, admin: bool = False) -> User:
            key = create_user(name, stack, admin=admin)
            found = find_user(key, stack)
            assert found is not None
            return User(name, key, found.user_id, ["--api-url", server.url, "--api-key", key])

        lead = user("lead", admin=True)
        users = {name: user(name) for name in ("alice", "bob", "carol", "dave")}
        for words in (
            ("admin", "teams", "create", "vision"),
            ("admin", "teams", "add", "vision", users["alice"].user_id),
            ("admin", "teams", "add", "vision", users["carol"].user_id, "--team-admin"),
            ("admin", "teams", "create", "nlp"),
            ("admin", "teams", "add", "nlp", users["bob"].user_id),
            ("admin", "teams", "add", "nlp", users["dave"].user_id),
            ("admin", "buckets", "grant", "lab-data", "--user", users["dave"].user_id),
        ):
            done = run(lead, *words)
            assert done.exit_code == 0, (words, done.output)
        deployment = Deployment(server.url, lead, users, {}, {})
        for name, who in users.items():
            submitted = api(deployment, who, "POST", "/jobs", json={"task": f"name: {name}-job\nrun: ls\n"})
            assert submitted.status_code == 201, submitted.text
            deployment.jobs[name] = submitted.json()["job_id"]
        for name in ("alice", "bob"):
            launched = api(deployment, users[name], "POST", f"/clusters/{name}-dev/launch",
                           json={"task": "run: echo r\n"})  # fmt: skip
            assert launched.status_code == 201, launched.text
            deployment.clusters[name] = f"{name}-dev"
        yield deployment
    finally:
        server.stop()


def owners_of(rows: list[dict[str, Any]], key: str) -> set[tuple[str, str]]:
    return {(row[key], row["owner"]) for row in rows}


def test_an_admin_sees_every_users_jobs_and_clusters_with_their_owners(deployment: Deployment) -> None:
    lead, users = deployment.admin, deployment.users
    every_job = {(deployment.jobs[n], users[n].user_id) for n in users}
    every_cluster = {(deployment.clusters[n], users[n].user_id) for n in deployment.clusters}

    jobs = api(deployment, lead, "GET", "/jobs", params={"all_users": "true"})
    clusters = api(deployment, lead, "GET", "/clusters", params={"all_users": "true"})
    assert jobs.status_code == 200 and owners_of(jobs.json()["jobs"], "job_id") == every_job
    assert clusters.status_code == 200 and owners_of(clusters.json()["clusters"], "name") == every_cluster

    queued = run(lead, "queue", "-u", "--json")
    assert queued.exit_code == 0, queued.output
    assert owners_of(json.loads(queued.output), "job_id") == every_job
    status = run(lead, "status", "-u", "--json")
    assert status.exit_code == 0, status.output
    shown = json.loads(status.output)
    assert owners_of(shown["clusters"], "name") == every_cluster
    assert owners_of(shown["jobs"], "job_id") == every_job

    table = run(lead, "status", "--all-users")
    assert table.exit_code == 0 and "USER" in table.output and NOTE not in table.output, table.output
    for name, cluster in deployment.clusters.items():
        row = next(line for line in table.output.splitlines() if cluster in line)
        assert users[name].user_id in row, row
    managed = run(lead, "jobs", "queue", "-u")
    assert managed.exit_code == 0 and "4 job(s) of every user" in managed.output, managed.output
    for name, job_id in deployment.jobs.items():
        row = next(line for line in managed.output.splitlines() if job_id in line)
        assert users[name].user_id in row, row


def test_an_admins_listing_pages_with_a_cursor_across_users(deployment: Deployment) -> None:
    lead = deployment.admin
    first = run(lead, "queue", "-u", "--limit", "3")
    assert first.exit_code == 0 and "3 job(s) of every user" in first.output, first.output
    cursor = first.output.split("skyless queue -u --cursor '", 1)[1].split("'", 1)[0]
    rest = run(lead, "queue", "-u", "--limit", "3", "--cursor", cursor, "--json")
    seen = [line for line in first.output.splitlines() if "job-" in line]
    later = [job["job_id"] for job in json.loads(rest.output)]
    assert len(seen) == 3 and len(later) == 1
    assert not any(job_id in line for job_id in later for line in seen)
    assert {*later, *(j for j in deployment.jobs.values() if any(j in line for line in seen))} == set(
        deployment.jobs.values()
    )


@pytest.mark.parametrize("name", ["alice", "carol", "dave"])  # a user, a team admin, a bucket grant holder
def test_anyone_but_an_admin_asking_for_every_user_sees_only_their_own_and_the_note(
    deployment: Deployment, name: str
) -> None:
    who = deployment.users[name]
    others_jobs = [job for n, job in deployment.jobs.items() if n != name]

    for path in ("/jobs", "/clusters"):
        refused = api(deployment, who, "GET", path, params={"all_users": "true"})
        assert refused.status_code == 403, refused.text
        assert refused.json()["field"] == "all_users" and "admin key" in refused.json()["message"]

    for words in (("queue", "-u"), ("jobs", "queue", "--all-users"), ("status", "-u")):
        shown = run(who, *words)
        assert shown.exit_code == 0, (words, shown.output)
        assert NOTE in shown.output and "skyless team jobs|clusters TEAM" in shown.output
        assert deployment.jobs[name] in shown.output and "USER" not in shown.output
        for job_id in others_jobs:
            assert job_id not in shown.output, (words, job_id)
    clusters = run(who, "status", "-u").output
    for owner, cluster in deployment.clusters.items():
        assert (cluster in clusters) == (owner == name), cluster


def test_a_bad_all_users_value_is_a_400_naming_it(deployment: Deployment) -> None:
    answer = api(deployment, deployment.admin, "GET", "/jobs", params={"all_users": "everyone"})
    assert answer.status_code == 400 and answer.json()["field"] == "all_users", answer.text


def test_the_cluster_verbs_with_u_act_on_the_callers_own_only_even_an_admins(deployment: Deployment) -> None:
    lead, bob = deployment.admin, deployment.users["bob"]
    for words in (("stop", "-u", "--async"), ("down", "-u", "--async"), ("autostop", "-u", "-i", "10")):
        done = run(lead, *words)
        assert done.exit_code == 0, (words, done.output)
        assert "acting on your own only" in done.output, done.output
    shown = api(deployment, bob, "GET", f"/clusters/{deployment.clusters['bob']}").json()
    assert shown["state"] not in ("STOPPING", "STOPPED", "TERMINATING", "TERMINATED")
    assert shown["autostop_minutes"] == -1
