"""The dashboard in a real browser: headless Chromium (Debian's package) driven by Playwright, against the
local runtime as a user starts it (`skyless local up`). Jobs launched here run on the local cloud: one
finishes, one is preempted and recovers elsewhere, one fails; another user's job stays invisible, except
to the admin (the local user) ticking "every user", who sees alice's and bob's jobs with their owners.

Screenshots go to $SKYLESS_TEST_ARTEFACTS (default: <repo>/tmp/artefacts). Without Chromium or Playwright
the browser tests skip, saying why; `.ci/run` installs Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_end_to_end_local import TERMINAL, Runtime

from local_runtime.local_settings import FAKE_AWS_ENV

ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = Path(os.environ.get("SKYLESS_TEST_ARTEFACTS") or ROOT / "tmp" / "artefacts")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FINISHED = "name: nightly-eval\nresources:\n  cpus: 1+\nrun: for i in 1 2 3; do echo eval batch $i; done\n"
FAILED = "name: flaky-train\nresources:\n  cpus: 2+\nrun: |\n  echo 'epoch 1: loss nan'\n  exit 3\n"
SPOT = """\
name: spot-train
resources:
  cpus: 2
  use_spot: true
  job_recovery:
    strategy: EAGER_NEXT_REGION
run: |
  step=0
  while [ "$step" -lt 10 ]; do
    step=$((step + 1))
    echo "step $step/10: loss $((100 / step))"
    sleep 1
  done
"""
BOBS = "name: bobs-secret-job\nresources:\n  cpus: 1+\nrun: echo bob\n"
XSS = "<img src=x onerror=alert(1)>"
BOBS_XSS = f"name: {json.dumps(XSS)}\nresources:\n  cpus: 1+\nrun: echo bob\n"
ALICES = "name: alices-job\nresources:\n  cpus: 1+\nrun: echo alice\n"


class Demo:
    """The local runtime with the jobs the browser looks at."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.jobs: dict[str, str] = {}
        self.dashboard_url = ""
        self.api_key = ""
        self.bob_job = ""
        self.bob_xss_job = ""
        self.alice_key = ""
        self.alice_job = ""

    def submit(self, text: str, api: Any = None) -> str:
        answer = (api or self.runtime.api).post("/jobs", json={"task": text, "filename": "task.yaml"})
        assert answer.status_code == 201, answer.text
        return answer.json()["job_id"]


def sign_in_details(runtime: Runtime) -> tuple[str, str]:
    """What `skyless dashboard` tells a user: the URL, and (with --show-key) the key to sign in with."""
    printed = runtime.cli("dashboard", "--no-open", "--show-key")
    assert printed.returncode == 0, printed.stdout + printed.stderr
    url = re.search(r"Dashboard: (\S+)", printed.stdout)
    key = re.search(r"Sign in with this API key: (\S+)", printed.stdout)
    assert url and key, printed.stdout
    return url.group(1), key.group(1)


def run_the_jobs(demo: Demo) -> None:
    """A finished job, a spot job preempted and recovered elsewhere, a failed one; and bob's job."""
    runtime = demo.runtime
    demo.jobs["finished"] = demo.submit(FINISHED)
    demo.jobs["failed"] = demo.submit(FAILED)
    spot = demo.jobs["recovered"] = demo.submit(SPOT)
    runtime.wait(spot, lambda j: j["state"] == "RUNNING" and "step 2/10" in runtime.logs(spot, 0))
    preempt = runtime.cli("local", "preempt", spot, "--grace", "1")
    assert preempt.returncode == 0, preempt.stdout + preempt.stderr
    for job_id in demo.jobs.values():
        runtime.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=180)
    bob = httpx.Client(
        base_url=runtime.api.base_url,
        timeout=30,
        headers={"Authorization": f"Bearer {new_user(runtime, 'bob')}"},
    )
    demo.bob_job = demo.submit(BOBS, bob)
    demo.bob_xss_job = demo.submit(BOBS_XSS, bob)
    demo.alice_key = new_user(runtime, "alice")
    alice = httpx.Client(
        base_url=runtime.api.base_url, timeout=30, headers={"Authorization": f"Bearer {demo.alice_key}"}
    )
    demo.alice_job = demo.submit(ALICES, alice)


def new_user(runtime: Runtime, name: str) -> str:
    """A user who is not an admin, as an operator makes one; answers the API key."""
    env = {**runtime.env, **FAKE_AWS_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{runtime.moto_port}"}
    made = subprocess.run(
        [sys.executable, "-m", "shared.store.users", "create", name],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    runtime = Runtime(tmp_path_factory.mktemp("skyless-home"))
    runtime.up()
    try:
        demo = Demo(runtime)
        demo.dashboard_url, demo.api_key = sign_in_details(runtime)
        run_the_jobs(demo)
        yield demo
    finally:
        runtime.cli("local", "down")


def test_skyless_dashboard_prints_the_local_url_and_hides_the_key_unless_asked(demo: Demo) -> None:
    runtime = demo.runtime
    assert demo.dashboard_url == f"http://127.0.0.1:{runtime.api_port}/dashboard"
    assert demo.api_key == json.loads((runtime.home / "local" / "runtime.json").read_text())["api_key"]
    printed = runtime.cli("dashboard", "--no-open")
    assert printed.returncode == 0 and "local runtime" in printed.stdout
    assert demo.api_key not in printed.stdout and "--show-key" in printed.stdout


def test_the_jobs_ran_on_the_local_cloud(demo: Demo) -> None:
    runtime = demo.runtime
    assert runtime.job(demo.jobs["finished"])["state"] == "SUCCEEDED"
    assert runtime.job(demo.jobs["failed"])["state"] == "FAILED"
    recovered = runtime.job(demo.jobs["recovered"])
    assert recovered["state"] == "SUCCEEDED" and recovered["recoveries"] >= 1, recovered


@pytest.fixture(scope="module")
def browser(demo: Demo) -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine: apt-get install -y chromium (.ci/run does)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(browser: Any, demo: Demo) -> Iterator[Any]:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    context.close()


def signed_in(page: Any, demo: Demo) -> Any:
    """The page, signed in (each test can run on its own; in order, the first test signed in already)."""
    page.goto(demo.dashboard_url)
    if "/dashboard/login" in page.url:
        page.fill("#api_key", demo.api_key)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/dashboard$"))
    return page


def shot(page: Any, name: str) -> Path:
    path = ARTEFACTS / f"dashboard-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def test_signing_in_with_the_api_key_shows_the_users_jobs(page: Any, demo: Demo) -> None:
    page.goto(demo.dashboard_url)
    assert "/dashboard/login" in page.url  # no session: the sign-in form
    page.fill("#api_key", "sky_wrong")
    page.click("button[type=submit]")
    assert "not recognised" in page.inner_text("main")
    page.fill("#api_key", demo.api_key)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/dashboard$"))

    listing = page.inner_text("table.jobs")
    for job_id in demo.jobs.values():
        assert job_id in listing
    assert "FAILED" in listing and "SUCCEEDED" in listing and "spot" in listing
    assert demo.bob_job not in listing and "bobs-secret-job" not in listing
    assert page.locator("svg.chart").count() == 1  # spend by cloud
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["skyless_session"]["httpOnly"] and cookies["skyless_session"]["sameSite"] == "Strict"
    assert demo.api_key not in cookies["skyless_session"]["value"] and demo.api_key not in page.url
    assert page.evaluate("() => JSON.stringify(window.localStorage) + document.cookie") == "{}"
    shot(page, "jobs")


def test_the_recovered_jobs_page_shows_its_timeline_attempts_and_logs(page: Any, demo: Demo) -> None:
    job_id = demo.jobs["recovered"]
    signed_in(page, demo).click(f"text={job_id}")
    page.wait_for_url(re.compile(rf".*/dashboard/jobs/{job_id}$"))

    assert "RECOVERING" in page.inner_text("#timeline") and "attempt 1" in page.inner_text("#timeline")
    attempts = page.locator("#attempts tbody tr")
    assert attempts.count() >= 2  # the preempted attempt and the one that finished
    assert "spot" in page.inner_text("#attempts")
    assert "step 10/10" in page.inner_text("#log-0")
    assert "preempted" in page.inner_text("#failover")  # why the next attempt went elsewhere
    shot(page, "recovered-job")


def test_the_failed_jobs_page_says_why(page: Any, demo: Demo) -> None:
    signed_in(page, demo).goto(f"{demo.dashboard_url}/jobs/{demo.jobs['failed']}")
    assert "FAILED" in page.inner_text("h1")
    assert "epoch 1: loss nan" in page.inner_text("#log-0")
    assert "exit" in page.inner_text("dl.facts").lower()
    shot(page, "failed-job")


def test_another_users_job_cannot_be_seen(page: Any, demo: Demo) -> None:
    answer = signed_in(page, demo).goto(f"{demo.dashboard_url}/jobs/{demo.bob_job}")
    assert answer is not None and answer.status == 404
    assert "bobs-secret-job" not in page.content() and "no job" in page.inner_text("main")


def test_the_admin_ticks_every_user_and_sees_alices_and_bobs_jobs_with_their_owners(
    page: Any, demo: Demo
) -> None:
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    signed_in(page, demo).check("input[name=all_users]")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r".*/dashboard\?.*all_users=true"))

    rows = {
        job: page.locator("table.jobs tbody tr", has_text=job)
        for job in (demo.jobs["finished"], demo.alice_job, demo.bob_job, demo.bob_xss_job)
    }
    assert all(row.count() == 1 for row in rows.values())
    assert "alice" in rows[demo.alice_job].inner_text() and "alices-job" in rows[demo.alice_job].inner_text()
    assert "bob" in rows[demo.bob_job].locator("td.owner").inner_text()
    xss = rows[demo.bob_xss_job]
    assert XSS in xss.inner_text() and xss.locator("img").count() == 0  # the name as text, not an element
    assert page.locator("table.jobs img").count() == 0 and alerts == []
    assert rows[demo.bob_job].locator("a").count() == 0  # bob's job page is not the admin's to open
    shot(page, "every-user-jobs")

    page.goto(f"{demo.dashboard_url}/clusters?all_users=true")
    assert "Every user's clusters" in page.inner_text("h1") and alerts == []


def test_alice_sees_only_her_jobs_no_toggle_and_a_forged_one_is_refused(browser: Any, demo: Demo) -> None:
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    try:
        tab = context.new_page()
        tab.goto(demo.dashboard_url)
        tab.fill("#api_key", demo.alice_key)
        tab.click("button[type=submit]")
        tab.wait_for_url(re.compile(r".*/dashboard$"))
        listing = tab.inner_text("table.jobs")
        assert demo.alice_job in listing and demo.bob_job not in listing
        assert demo.jobs["finished"] not in listing and tab.locator("input[name=all_users]").count() == 0

        forged = tab.goto(f"{demo.dashboard_url}?all_users=true")
        assert forged is not None and forged.status == 403
        said = tab.inner_text("main")
        assert "only an admin key may read every user's jobs" in said and "all_users" in said
        assert demo.bob_job not in tab.content() and "Sign out" in tab.inner_text(
            "body"
        )  # a page, not a crash
    finally:
        context.close()


def test_a_running_jobs_log_follows_live(page: Any, demo: Demo) -> None:
    runtime = demo.runtime
    job_id = demo.submit(SPOT)
    runtime.wait(job_id, lambda j: j["state"] == "RUNNING" and "step 1/10" in runtime.logs(job_id, 0))
    signed_in(page, demo).goto(f"{demo.dashboard_url}/jobs/{job_id}")
    first = page.inner_text("#log-0")
    page.wait_for_function(
        "() => document.querySelector('#log-0').textContent.includes('step 6/10')", timeout=60_000
    )
    assert len(page.inner_text("#log-0")) > len(first)
    page.wait_for_function(
        "() => document.querySelector('h1').textContent.includes('SUCCEEDED')", timeout=90_000
    )
    demo.jobs["live"] = job_id


def test_the_planner_and_the_cost_page(page: Any, demo: Demo) -> None:
    signed_in(page, demo).goto(f"{demo.dashboard_url}/plan")
    page.fill("#task", "name: gpu\nresources:\n  accelerators: {A100: 8, H100: 8}\nrun: nvidia-smi\n")
    page.click("form.plan-form button[type=submit]")
    assert "Plan: estimated" in page.inner_text("main") and "A100" in page.inner_text("table.plan")
    page.fill("#task", "resources:\n  accelerators: NOPE:1\n")
    page.click("form.plan-form button[type=submit]")
    assert "no accelerator NOPE" in page.inner_text(".error")

    page.goto(f"{demo.dashboard_url}/costs?days=7&by=job")
    text = page.inner_text("main")
    assert demo.jobs["recovered"] in text and "on-demand would cost" in text.lower()
    shot(page, "costs")


def test_signing_out_ends_the_session(page: Any, demo: Demo) -> None:
    signed_in(page, demo)
    page.click("text=Sign out")
    page.wait_for_url(re.compile(r".*/dashboard/login$"))
    page.goto(demo.dashboard_url)
    assert "/dashboard/login" in page.url
