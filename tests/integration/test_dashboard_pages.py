"""The dashboard through Chalice's test client (no browser): sign-in and its cookie, CSRF on every form,
a user sees only their own jobs, and every string a user controls is escaped (job names, task text,
log lines, timeline messages, schedule names)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client
from test_api_gateway import http_api_event

from functions.submit.app import app, handler
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.schedules.operations import create_schedule
from shared.states import JobState
from shared.store.users import create_user, revoke_key
from shared.wiring import wiring_for

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
SCRIPT = "<script>alert(1)</script>"
EVIL_NAME = "evil-<script>alert(1)</script>"  # a job name SkyPilot's schema lets through


class Browser:
    """A browser's view through the Chalice test client: it keeps the cookies it is given."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.cookies: dict[str, str] = {}

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items() if v)
        return {**({"Cookie": cookie} if cookie else {}), **(extra or {})}

    def _keep(self, answer: Any) -> Any:
        raw = answer.headers.get("Set-Cookie") or answer.headers.get("set-cookie")
        for header in raw if isinstance(raw, list) else [raw] if raw else []:
            for one in re.split(r",(?=\s*skyless_)", header):
                jar: SimpleCookie = SimpleCookie()
                jar.load(one)
                for name, morsel in jar.items():
                    self.cookies[name] = morsel.value
        return answer

    def get(self, path: str) -> Any:
        return self._keep(self.client.http.get(path, headers=self._headers()))

    def post(self, path: str, fields: dict[str, str], headers: dict[str, str] | None = None) -> Any:
        body = urlencode(fields)
        return self._keep(
            self.client.http.post(path, headers=self._headers({**FORM, **(headers or {})}), body=body)
        )

    def sign_in(self, key: str) -> Any:
        page = self.get("/dashboard/login")
        return self.post("/dashboard/login", {"api_key": key, "csrf": csrf_of(page), "next": "/dashboard"})

    def csrf(self, path: str = "/dashboard") -> str:
        return csrf_of(self.get(path))


def csrf_of(answer: Any) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', answer.body.decode())
    assert found, answer.body.decode()[:500]
    return found.group(1)


def text(answer: Any) -> str:
    return answer.body.decode("utf-8")


def set_cookie_headers(answer: Any) -> list[str]:
    raw = answer.headers.get("Set-Cookie") or answer.headers.get("set-cookie") or []
    headers = raw if isinstance(raw, list) else [raw]
    return [part for header in headers for part in re.split(r",(?=\s*skyless_)", header)]


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


@pytest.fixture
def users(stack: Settings) -> dict[str, str]:
    return {"alice": create_user("alice", stack), "bob": create_user("bob", stack)}


def user_id(stack: Settings, key: str) -> str:
    from shared.store.users import find_user

    found = find_user(key, stack)
    assert found is not None
    return found.user_id


def run_a_job(
    stack: Settings,
    owner: str,
    *,
    name: str = "train",
    log: str = "step 1\n",
    spot: bool = True,
    end: JobState = JobState.SUCCEEDED,
    message: str = "every node exited 0",
) -> str:
    """A job with one launched attempt (its cluster record), a timeline and a log chunk, ended as `end`."""
    task = f"name: {name!r}\nresources:\n  cpus: 2\n  use_spot: {str(spot).lower()}\nrun: echo hi\n"
    job_id = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner=owner, task_text=task, filename="t.yaml")
    ).job_id
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert job is not None
    now = time.time()
    cluster_id = f"{job_id}-0"
    store.new_cluster(
        cluster_id=cluster_id,
        job_id=job_id,
        attempt=0,
        provider="local",
        cloud="aws",
        region="us-east-1",
        zone="us-east-1a",
        instance_type="m5.large",
        use_spot=spot,
        hourly_price=0.04 if spot else 0.096,
        num_nodes=1,
        state="TERMINATED",
        launched_at=now - 3600,
        terminated_at=now - 60,
    ).save()
    for state in (JobState.PLANNED, JobState.PROVISIONING, JobState.SETTING_UP, JobState.RUNNING):
        if job.state != state.value:  # a job is planned at submit already
            assert store.move(job, state, f"moved to {state.value}", changes={"cluster_id": cluster_id})
    assert store.move(job, end, message)
    objects = wiring_for(stack).objects
    objects.put_text(f"runs/{job_id}/logs/0/000-00000000.log", log)
    return job_id


# ------------------------------------------------------------------------------------------ sign-in


def test_without_a_session_every_page_goes_to_sign_in(client: Client, stack: Settings) -> None:
    for path in (
        "/dashboard",
        "/dashboard/costs",
        "/dashboard/jobs/job-x",
        "/dashboard/schedules",
        "/dashboard/notifications",
        "/dashboard/plan",
    ):
        answer = client.http.get(path)
        assert answer.status_code == 303, path
        assert answer.headers["Location"].startswith("/dashboard/login?next=")
    assert client.http.get("/").headers["Location"] == "/dashboard"
    assert client.http.get("/dashboard/jobs/job-x/logs").status_code == 401  # the script's route: JSON


def test_sign_in_sets_an_httponly_samesite_strict_cookie_without_the_key(
    client: Client, users: dict[str, str]
) -> None:
    browser = Browser(client)
    answer = browser.sign_in(users["alice"])

    assert answer.status_code == 303 and answer.headers["Location"] == "/dashboard"
    session = next(c for c in set_cookie_headers(answer) if c.startswith("skyless_session="))
    assert "HttpOnly" in session and "SameSite=Strict" in session and "Path=/dashboard" in session
    assert "Max-Age=" in session and "Secure" not in session  # plain http here: Secure only over https
    assert users["alice"] not in session
    page = browser.get("/dashboard")
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert users["alice"] not in text(page) and "alice" in text(page)
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]


def test_the_cookie_is_secure_when_the_browser_came_over_https(client: Client, users: dict[str, str]) -> None:
    browser = Browser(client)
    page = browser.get("/dashboard/login")
    answer = browser.post(
        "/dashboard/login",
        {"api_key": users["alice"], "csrf": csrf_of(page)},
        headers={"X-Forwarded-Proto": "https"},
    )
    session = next(c for c in set_cookie_headers(answer) if c.startswith("skyless_session="))
    assert "Secure" in session


def test_a_wrong_key_is_refused_on_the_form_and_sets_no_session(
    client: Client, users: dict[str, str]
) -> None:
    browser = Browser(client)
    answer = browser.sign_in("sky_not-a-key")

    assert answer.status_code == 401 and "not recognised" in text(answer)
    assert "sky_not-a-key" not in text(answer)
    assert "skyless_session" not in browser.cookies


def test_a_tampered_or_revoked_session_is_refused(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    browser = Browser(client)
    browser.sign_in(users["alice"])
    good = browser.cookies["skyless_session"]
    browser.cookies["skyless_session"] = good[:-3] + ("AAA" if not good.endswith("AAA") else "BBB")
    assert browser.get("/dashboard").status_code == 303
    browser.cookies["skyless_session"] = good
    assert browser.get("/dashboard").status_code == 200

    assert revoke_key(users["alice"], stack)
    answer = browser.get("/dashboard")
    assert answer.status_code == 303 and "why=revoked" in answer.headers["Location"]


def test_after_logout_a_copied_session_cookie_no_longer_works(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    alice_id = user_id(stack, users["alice"])
    job_id = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner=alice_id, task_text="name: x\nrun: sleep 1\n")
    ).job_id
    alice, bob = Browser(client), Browser(client)
    alice.sign_in(users["alice"])
    bob.sign_in(users["bob"])
    thief = Browser(client)
    thief.cookies = dict(alice.cookies)  # the cookie copied off alice's machine, and a form token of hers
    stolen, stolen_csrf = thief.cookies["skyless_session"], thief.csrf()
    assert thief.get("/dashboard").status_code == 200

    answer = alice.post("/dashboard/logout", {"csrf": alice.csrf()})
    assert answer.status_code == 303 and answer.headers["Location"].endswith("/dashboard/login")
    assert any("skyless_session=;" in h and "Max-Age=0" in h for h in set_cookie_headers(answer))

    replayed = thief.get("/dashboard")
    assert replayed.status_code == 303 and "why=signed_out" in replayed.headers["Location"]
    assert thief.post(f"/dashboard/jobs/{job_id}/cancel", {"csrf": stolen_csrf}).status_code == 303
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.state == "PLANNED"  # the replayed form did nothing
    assert thief.post("/dashboard/logout", {"csrf": stolen_csrf}).status_code == 303  # a replayed logout
    # As API Gateway delivers it to the Lambda entry point: cookies in the payload 2.0 `cookies` list.
    event = http_api_event("GET", "/dashboard")
    event["cookies"] = [f"skyless_session={stolen}"]
    lambda_answer = handler(event, None)
    assert lambda_answer["statusCode"] == 303 and "why=signed_out" in lambda_answer["headers"]["Location"]

    assert bob.get("/dashboard").status_code == 200  # another user's session is not touched
    alice.sign_in(users["alice"])  # signing in again is a new session; the copied one stays dead
    assert alice.get("/dashboard").status_code == 200
    thief.cookies["skyless_session"] = stolen
    assert thief.get("/dashboard").status_code == 303


def test_an_expired_session_is_refused(
    client: Client, users: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = Browser(client)
    browser.sign_in(users["alice"])
    monkeypatch.setenv("SKYLESS_SESSION_SECONDS", "1")
    time.sleep(2.1)
    answer = browser.get("/dashboard")
    assert answer.status_code == 303 and "why=expired" in answer.headers["Location"]


def test_sign_in_goes_back_only_to_a_dashboard_page(client: Client, users: dict[str, str]) -> None:
    browser = Browser(client)
    page = browser.get("/dashboard/login?next=https://evil.example/")
    assert 'value="/dashboard"' in text(page)
    answer = browser.post(
        "/dashboard/login", {"api_key": users["alice"], "csrf": csrf_of(page), "next": "//evil.example/"}
    )
    assert answer.headers["Location"] == "/dashboard"


# --------------------------------------------------------------------------------------------- CSRF


def test_sign_in_without_the_forms_token_or_cookie_is_refused(client: Client, users: dict[str, str]) -> None:
    browser = Browser(client)
    page = browser.get("/dashboard/login")
    token = csrf_of(page)
    no_token = browser.post("/dashboard/login", {"api_key": users["alice"]})
    browser.cookies.pop("skyless_sign_in")
    no_cookie = browser.post("/dashboard/login", {"api_key": users["alice"], "csrf": token})

    assert no_token.status_code == 403 and no_cookie.status_code == 403
    assert "skyless_session" not in browser.cookies


def test_every_form_post_needs_the_sessions_csrf_token(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    alice = user_id(stack, users["alice"])
    job_id = submit_job(
        wiring_for(stack),
        SubmitJob.from_text(owner=alice, task_text="name: x\nresources:\n  cpus: 1+\nrun: sleep 1\n"),
    ).job_id
    browser = Browser(client)
    browser.sign_in(users["alice"])
    other = Browser(client)
    other.sign_in(users["alice"])
    others_token = other.csrf()  # a real token, of another session

    for path, fields in (
        (f"/dashboard/jobs/{job_id}/cancel", {}),
        ("/dashboard/plan", {"task": "resources:\n  cpus: 1\nrun: echo\n"}),
        ("/dashboard/logout", {}),
    ):
        assert browser.post(path, fields).status_code == 403, path
        assert browser.post(path, {**fields, "csrf": "0" * 64}).status_code == 403, path
        assert browser.post(path, {**fields, "csrf": others_token}).status_code == 403, path
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert job is not None and job.state == "PLANNED"  # nothing changed (planned at submit)

    answer = browser.post(f"/dashboard/jobs/{job_id}/cancel", {"csrf": browser.csrf()})
    assert answer.status_code == 303
    job = store.get(job_id)
    assert job is not None and job.state == "CANCELLED"


def test_a_json_or_text_post_to_a_form_route_is_refused(client: Client, users: dict[str, str]) -> None:
    browser = Browser(client)
    browser.sign_in(users["alice"])
    answer = client.http.post(
        "/dashboard/logout", headers={**browser._headers(), "Content-Type": "text/plain"}, body="csrf=x"
    )
    assert answer.status_code == 415


# ----------------------------------------------------------------------------------- what a user sees


def test_a_user_sees_their_jobs_and_not_another_users(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    mine = run_a_job(stack, user_id(stack, users["alice"]), name="alice-train")
    theirs = run_a_job(stack, user_id(stack, users["bob"]), name="bob-secret", log="bob's log line\n")
    browser = Browser(client)
    browser.sign_in(users["alice"])

    listing = text(browser.get("/dashboard"))
    assert mine in listing and "alice-train" in listing
    assert theirs not in listing and "bob-secret" not in listing
    assert browser.get(f"/dashboard/jobs/{theirs}").status_code == 404
    assert browser.get(f"/dashboard/jobs/{theirs}/logs?rank=0").status_code == 404
    assert browser.post(f"/dashboard/jobs/{theirs}/cancel", {"csrf": browser.csrf()}).status_code == 404
    costs = text(browser.get("/dashboard/costs?days=7&by=job"))
    assert mine in costs and theirs not in costs
    assert browser.get("/dashboard/costs?all_users=true").status_code == 403  # not an admin


def test_the_job_page_shows_timeline_attempts_plan_and_logs(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    job_id = run_a_job(stack, user_id(stack, users["alice"]), log="epoch 1 loss 0.5\n")
    browser = Browser(client)
    browser.sign_in(users["alice"])

    page = text(browser.get(f"/dashboard/jobs/{job_id}"))
    assert '<svg class="chart"' in page and "attempt 0" in page
    assert "aws/us-east-1/us-east-1a" in page and "m5.large" in page
    assert "epoch 1 loss 0.5" in page
    assert "SUCCEEDED" in page and "every node exited 0" in page
    assert "$0.0393" in page  # 59 min of one node at $0.04/h spot
    logs = browser.get(f"/dashboard/jobs/{job_id}/logs?rank=0")
    assert logs.json_body["text"] == "epoch 1 loss 0.5\n" and logs.json_body["finished"] is True


def test_an_admin_sees_every_users_costs_but_not_their_job_pages(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    theirs = run_a_job(stack, user_id(stack, users["bob"]), name="bob-train")
    admin = Browser(client)
    admin.sign_in(create_user("lead", stack, admin=True))

    report = text(admin.get("/dashboard/costs?all_users=true&by=user"))
    assert "bob" in report and theirs in report
    assert admin.get(f"/dashboard/jobs/{theirs}").status_code == 404


# ------------------------------------------------------------------------------------------- escaping


def test_every_user_provided_string_is_escaped(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    alice = user_id(stack, users["alice"])
    job_id = run_a_job(
        stack,
        alice,
        name=EVIL_NAME,
        log=f"log {SCRIPT} line\n",
        spot=False,
        end=JobState.FAILED,
        message=f"node said {SCRIPT}",
    )
    create_schedule(
        stack,
        owner=alice,
        name="nightly",
        cron="0 3 * * *",
        task_text=f"name: sched\nresources:\n  cpus: 1+\nrun: echo '{SCRIPT}'\n",
        filename="s.yaml",
    )
    browser = Browser(client)
    browser.sign_in(users["alice"])
    plan_page = browser.post(
        "/dashboard/plan",
        {
            "csrf": browser.csrf(),
            "filename": f"{SCRIPT}.yaml",
            "task": f"name: p\nresources:\n  cpus: 1+\nrun: echo '{SCRIPT}'\n",
        },
    )
    bad_plan = browser.post(
        "/dashboard/plan",
        {"csrf": browser.csrf(), "filename": "bad.yaml", "task": f"name: p\nresources:\n  {SCRIPT}: 1\n"},
    )
    pages = {
        "jobs": browser.get("/dashboard"),
        "job": browser.get(f"/dashboard/jobs/{job_id}"),
        "costs": browser.get("/dashboard/costs?by=job"),
        "schedules": browser.get("/dashboard/schedules"),
        "plan": plan_page,
        "bad plan": bad_plan,
        "filter": browser.get("/dashboard?name=" + SCRIPT.replace("<", "%3C").replace(">", "%3E")),
        "error": browser.get(
            "/dashboard/jobs/" + SCRIPT.replace("<", "%3C").replace(">", "%3E").replace("/", "%2F")
        ),
    }
    assert plan_page.status_code == 200 and bad_plan.status_code == 400
    for name, answer in pages.items():
        body = text(answer)
        assert "<script>alert" not in body, name
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text(
        pages["job"]
    )  # the name, the log line, the message
    assert text(pages["job"]).count("&lt;script&gt;") >= 3
    assert "&lt;script&gt;" in text(pages["plan"])  # the task text kept in the form
    assert "&lt;script&gt;" in text(pages["bad plan"])  # named in the error


def test_a_bad_filter_is_a_400_page_naming_the_field(client: Client, users: dict[str, str]) -> None:
    browser = Browser(client)
    browser.sign_in(users["alice"])
    answer = browser.get("/dashboard?state=sleeping")
    assert answer.status_code == 400 and "state" in text(answer) and "sleeping" in text(answer)
    assert browser.get("/dashboard/costs?days=lots").status_code == 400


def test_the_static_files_are_served_and_nothing_else(client: Client) -> None:
    assert client.http.get("/dashboard/static/dashboard.js").status_code == 200
    assert client.http.get("/dashboard/static/style.css").headers["Content-Type"].startswith("text/css")
    assert client.http.get("/dashboard/static/..%2Fpages.py").status_code == 404


def test_no_page_or_redirect_carries_the_key(client: Client, stack: Settings, users: dict[str, str]) -> None:
    job_id = run_a_job(stack, user_id(stack, users["alice"]))
    browser = Browser(client)
    answers = [browser.sign_in(users["alice"])]
    for path in (
        "/dashboard",
        f"/dashboard/jobs/{job_id}",
        "/dashboard/costs",
        "/dashboard/schedules",
        "/dashboard/notifications",
        "/dashboard/plan",
    ):
        answers.append(browser.get(path))
    for answer in answers:
        assert users["alice"] not in text(answer)
        assert users["alice"] not in str(answer.headers)
        assert "api_key=" not in answer.headers.get("Location", "")


# ------------------------------------------------------------------ through API Gateway's HTTP API events


def test_signing_in_and_reading_a_page_through_http_api_events(
    stack: Settings, users: dict[str, str]
) -> None:
    """As AWS calls the Lambda: cookies arrive in `cookies`, and each Set-Cookie leaves in `cookies`."""
    from test_api_gateway import http_api_event

    from functions.submit.app import handler

    https = {"x-forwarded-proto": "https"}
    form = handler(http_api_event("GET", "/dashboard/login", headers=https), None)
    assert form["statusCode"] == 200 and form["headers"]["Content-Type"].startswith("text/html")
    (sign_in_cookie,) = form["cookies"]
    assert "Secure" in sign_in_cookie and "HttpOnly" in sign_in_cookie
    token = re.search(r'name="csrf" value="([^"]+)"', form["body"])
    assert token
    body = urlencode({"api_key": users["alice"], "csrf": token.group(1), "next": "/dashboard"})
    event = http_api_event(
        "POST",
        "/dashboard/login",
        body=body,
        headers={**https, "content-type": "application/x-www-form-urlencoded"},
    )
    event["cookies"] = [sign_in_cookie.split(";", 1)[0]]
    signed_in = handler(event, None)

    assert signed_in["statusCode"] == 303 and signed_in["headers"]["Location"] == "/dashboard"
    session = next(c for c in signed_in["cookies"] if c.startswith("skyless_session="))
    assert len(signed_in["cookies"]) == 2 and "Secure" in session
    page_event = http_api_event("GET", "/dashboard", headers=https)
    page_event["cookies"] = [session.split(";", 1)[0]]
    page = handler(page_event, None)
    assert page["statusCode"] == 200 and "Your jobs" in page["body"]


def test_a_job_groups_page_lists_its_tasks_and_a_tasks_page_links_its_group(
    client: Client, stack: Settings, users: dict[str, str]
) -> None:
    group_text = (
        "name: rl\nexecution: parallel\nprimary_tasks: [trainer]\n---\nname: trainer\nrun: echo t\n"
        "---\nname: replay-buffer\nrun: echo r\n"
    )
    owner = user_id(stack, users["alice"])
    group_id = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner=owner, task_text=group_text, filename="rl.yaml")
    ).job_id
    browser = Browser(client)
    browser.sign_in(users["alice"])

    page = text(browser.get(f"/dashboard/jobs/{group_id}"))
    assert 'id="group-tasks"' in page and ">trainer</a>" in page and ">replay-buffer</a>" in page
    assert "primary" in page and "auxiliary" in page
    task_page = text(browser.get(f"/dashboard/jobs/{group_id}-t1"))
    assert f'href="/dashboard/jobs/{group_id}"' in task_page and "A task of job group" in task_page
    listing = text(browser.get("/dashboard"))
    assert group_id in listing and f"{group_id}-t1" not in listing  # the group stands for its tasks
