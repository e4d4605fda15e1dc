"""A named cluster as a user sees its state and money, at the installed `skyless` on a fresh HOME: launch -c
and exec, then `skyless cost-report` (the cluster's cost so far beside the jobs'), then the dashboard's
clusters page and the cluster's own page in headless Chromium (Debian's package, driven by Playwright).

Screenshots go to $SKYLESS_TEST_ARTEFACTS (default: <repo>/tmp/artefacts); docs/dashboard-clusters.png is
one of them. Without Chromium or Playwright the browser test skips, saying why."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")
ARTEFACTS = Path(os.environ.get("SKYLESS_TEST_ARTEFACTS") or ROOT / "tmp" / "artefacts")


class User:
    def __init__(self, home: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_"))}
        self.env.update(HOME=str(home), SKYLESS_LOCAL_MOTO_PORT=str(free_port()),
                        SKYLESS_LOCAL_API_PORT=str(free_port()), SKYLESS_CLUSTER_POLL_SECONDS="0.5",
                        SKYLESS_LOG_FLUSH_SECONDS="0.5", COLUMNS="200")  # fmt: skip

    def ok(self, *args: str) -> str:
        command = [str(SKYLESS), *args]
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False
        )
        assert done.returncode == 0, f"skyless {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[User]:
    person = User(tmp_path_factory.mktemp("home"))
    person.ok("launch", "-y", "-c", "dev", "examples/dev_cluster.yaml")
    person.ok("exec", "dev", "echo second job")
    yield person
    subprocess.run(
        [str(SKYLESS), "local", "down"], env=person.env, capture_output=True, timeout=120, check=False
    )


def test_cost_report_counts_the_named_clusters_cost_so_far(user: User) -> None:
    report = json.loads(user.ok("cost-report", "--json"))
    (dev,) = report["clusters"]
    assert dev["name"] == "dev" and dev["state"] == "UP" and dev["cost"] > 0, dev
    assert report["clusters_cost"] == dev["cost"]
    printed = user.ok("cost-report")
    assert "Named clusters (not torn down), cost so far" in printed
    assert re.search(r"dev\s+│?\s*UP", printed) and "+ named clusters" in printed, printed


@pytest.fixture(scope="module")
def page(user: User) -> Iterator[Any]:
    chromium = subprocess.run(["sh", "-c", "command -v chromium || command -v chromium-browser"],
                              capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    if not chromium:
        pytest.skip("no Chromium on this machine: apt-get install -y chromium (.ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        try:
            tab = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
            tab.set_default_timeout(30_000)
            yield tab
        finally:
            browser.close()


def test_the_clusters_page_shows_state_nodes_autostop_cost_and_its_jobs(page: Any, user: User) -> None:
    printed = user.ok("dashboard", "--no-open", "--show-key")
    url = re.search(r"Dashboard: (\S+)", printed)
    key = re.search(r"Sign in with this API key: (\S+)", printed)
    assert url and key, printed
    page.goto(url.group(1))
    page.fill("#api_key", key.group(1))
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/dashboard$"))

    page.click("nav >> text=Clusters")
    page.wait_for_url(re.compile(r".*/dashboard/clusters$"))
    row = page.inner_text("table.clusters tbody tr")
    assert "dev" in row and "UP" in row and "30m" in row and "1x" in row, row
    assert re.search(r"\$\d", row)  # cost so far
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / "dashboard-clusters.png"), full_page=True)

    page.click("table.clusters >> text=dev")
    page.wait_for_url(re.compile(r".*/dashboard/clusters/dev$"))
    jobs = page.inner_text("#cluster-jobs")
    assert "SUCCEEDED" in jobs and "echo second job" in jobs, jobs
    assert page.locator("#nodes tbody tr").count() == 1 and "30m" in page.inner_text("#autostop")
    page.screenshot(path=str(ARTEFACTS / "dashboard-cluster.png"), full_page=True)
