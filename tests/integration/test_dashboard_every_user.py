"""The dashboard's all-users view of jobs and clusters, through Chalice's test client: an admin ticks
"every user" and sees alice's and bob's records with their owners, page by page through the cursor of
`GET /jobs?all_users=true`; anyone else has no such box, and a forged `all_users=true` answers the API's 403
as a page saying why. Another user's job names and cluster names are escaped."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape

import pytest
from chalice.test import Client
from test_dashboard_clusters import launch
from test_dashboard_pages import Browser, run_a_job, text, user_id

from functions.submit.app import app
from shared.config import Settings
from shared.store.users import create_user

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


@pytest.fixture
def keys(stack: Settings) -> dict[str, str]:
    return {
        "alice": create_user("alice", stack),
        "bob": create_user("bob", stack),
        "lead": create_user("lead", stack, admin=True),
    }


def job_rows(page: str) -> list[str]:
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)


def test_an_admin_sees_every_users_jobs_with_their_owners_page_by_page(
    client: Client, stack: Settings, keys: dict[str, str]
) -> None:
    alices = [run_a_job(stack, user_id(stack, keys["alice"]), name=f"alice-{n}") for n in range(2)]
    bobs = run_a_job(stack, user_id(stack, keys["bob"]), name=XSS)
    admin = Browser(client)
    admin.sign_in(keys["lead"])

    own = text(admin.get("/dashboard"))
    assert 'name="all_users" value="true"' in own  # the box, unticked
    assert not any(job in own for job in [*alices, bobs])

    first = admin.get("/dashboard?all_users=true&limit=2")
    assert first.status_code == 200
    page = text(first)
    assert "Every user's jobs" in page and "<th>user</th>" in page and XSS not in page
    rows, pages = job_rows(page), 1
    while older := re.search(r'href="/dashboard\?([^"]+)">older jobs', page):
        assert "all_users=true" in unescape(older.group(1)) and pages < 20
        page, pages = text(admin.get("/dashboard?" + unescape(older.group(1)))), pages + 1
        rows += [row for row in job_rows(page) if "no jobs yet" not in row]
    assert pages >= 2 and len(rows) == 3  # two of three on the first page, the third after its cursor
    seen = {job: row for row in rows for job in [*alices, bobs] if job in row}
    assert set(seen) == {*alices, bobs}  # each once, none lost between the pages
    assert "alice" in seen[alices[0]] and user_id(stack, keys["alice"]) in seen[alices[0]]
    assert "bob" in seen[bobs] and "&lt;img src=x onerror=alert(1)&gt;" in seen[bobs]
    assert f'href="/dashboard/jobs/{bobs}"' not in seen[bobs]  # not a link to a page that answers 404


def test_anyone_else_has_no_toggle_and_a_forged_one_is_the_apis_403_as_a_page(
    client: Client, stack: Settings, keys: dict[str, str]
) -> None:
    mine = run_a_job(stack, user_id(stack, keys["alice"]), name="alice-train")
    theirs = run_a_job(stack, user_id(stack, keys["bob"]), name="bob-secret")
    alice = Browser(client)
    alice.sign_in(keys["alice"])

    own = text(alice.get("/dashboard"))
    assert mine in own and theirs not in own and 'name="all_users"' not in own and "<th>user</th>" not in own
    for path in ("/dashboard?all_users=true", "/dashboard/clusters?all_users=true"):
        forged = alice.get(path)
        page = text(forged)
        assert forged.status_code == 403 and "text/html" in forged.headers["Content-Type"], path
        assert "only an admin key may read every user" in page and "<code>all_users</code>" in page
        assert theirs not in page and "bob-secret" not in page
    api = client.http.get("/jobs?all_users=true", headers={"Authorization": f"Bearer {keys['alice']}"})
    assert api.status_code == 403 and json.loads(api.body)["field"] == "all_users"
    assert alice.get("/dashboard?all_users=maybe").status_code == 400


def test_an_admin_sees_every_users_clusters_with_their_owners(
    client: Client, stack: Settings, keys: dict[str, str]
) -> None:
    launch(client, keys["alice"], "dev")
    launch(client, keys["bob"], "bobs-box")
    launch(client, keys["lead"], "leads-box")
    admin = Browser(client)
    admin.sign_in(keys["lead"])

    own = text(admin.get("/dashboard/clusters"))
    assert "leads-box" in own and "bobs-box" not in own and 'name="all_users" value="true"' in own
    every = text(admin.get("/dashboard/clusters?all_users=true"))
    rows = {name: row for row in job_rows(every) for name in ("dev", "bobs-box", "leads-box") if name in row}
    assert set(rows) == {"dev", "bobs-box", "leads-box"}
    assert "alice" in rows["dev"] and "bob" in rows["bobs-box"] and "lead" in rows["leads-box"]
    assert 'href="/dashboard/clusters/leads-box"' in rows["leads-box"]
    assert 'href="/dashboard/clusters/bobs-box"' not in rows["bobs-box"]  # bob's page: a 404 for the admin

    alice = Browser(client)
    alice.sign_in(keys["alice"])
    assert 'name="all_users"' not in text(alice.get("/dashboard/clusters"))
