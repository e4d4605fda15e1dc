"""The provider scorecard through `GET /reports/providers` and `skyless report providers`, over a history
written by the lifecycle's own calls (refusals noted by the plan's walk, a preemption recovered by
`recover_job`, a silent node failed by `fail_job`); every figure against a count made by hand."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from history import seed_dynamo
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.jobs.failover import note_refusal, refusals_partition
from shared.jobs.recovery import fail_job, recover_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.optimizer.plan import Candidate
from shared.states import JobState
from shared.store.jobs import DynamoJobStore
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "260"}
TASK = "name: {name}\nresources:\n  cpus: 8\n  use_spot: true\nrun: echo\n"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def _candidate(cloud: str, region: str, itype: str) -> Candidate:
    return Candidate(
        cloud=cloud,
        region=region,
        zone=None,
        instance_type=itype,
        accelerator=None,
        accelerator_count=0,
        vcpus=8,
        memory_gib=16,
        use_spot=True,
        hourly_price=0.1,
        num_nodes=1,
        estimated_hours=1,
        estimated_cost=0.1,
    )


def _launch(
    stack: Settings,
    job_id: str,
    attempt: int,
    cloud: str,
    region: str,
    itype: str,
    *,
    spot: bool,
    price: float,
    ran_after: float,
    hours: float,
) -> None:
    """Record attempt `attempt` as launched `hours` ago and RUNNING `ran_after` seconds after its launch."""
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert job is not None
    launched = time.time() - hours * 3600
    cluster = store.new_cluster(
        cluster_id=f"{job_id}-{attempt}",
        job_id=job_id,
        attempt=attempt,
        provider="local",
        cloud=cloud,
        region=region,
        zone=None,
        instance_type=itype,
        use_spot=spot,
        hourly_price=price,
        num_nodes=1,
        state="UP",
        nodes={},
        launched_at=launched,
    )
    if job.state == JobState.RECOVERING.value:
        assert store.move(job, JobState.PLANNED, "replanned")
    if job.state == JobState.PLANNED.value:
        assert store.move(job, JobState.PROVISIONING, "provisioning")
    assert store.move(
        job, JobState.SETTING_UP, "launched", changes={"cluster_id": cluster.cluster_id}, also_save=[cluster]
    )
    assert store.move(job, JobState.RUNNING, "every node is running")
    # the RUNNING event is written now: move the cluster's launch to `ran_after` seconds before it
    running_at = float(store.timeline(job_id)[-1].at.split("#")[0])
    cluster.update(actions=[type(cluster).launched_at.set(running_at - ran_after)])


def _seed(stack: Settings, owner: str) -> str:
    wiring = wiring_for(stack)
    job_id = submit_job(wiring, SubmitJob.from_text(owner=owner, task_text=TASK.format(name="train"))).job_id
    job = wiring.store.get(job_id)
    assert job is not None
    # aws refuses twice for capacity, once for quota; gcp launches on spot, preempted with a warning
    for error in ("no capacity", "no capacity", "quota"):
        note_refusal(wiring, job, _candidate("aws", "us-east-1", "c6i.2xlarge"), error, "refused")
    _launch(
        stack, job_id, 0, "gcp", "us-central1", "n2-standard-8", spot=True, price=0.09, ran_after=400, hours=2
    )
    job = wiring.store.get(job_id)
    assert job is not None
    assert recover_job(wiring, job, "spot interruption warning", preempted=True, warned=True).value
    # aws on-demand then: its node goes silent and the job fails
    _launch(
        stack, job_id, 1, "aws", "us-east-1", "c6i.2xlarge", spot=False, price=0.34, ran_after=100, hours=1
    )
    job = wiring.store.get(job_id)
    assert job is not None
    fail_job(wiring, job, "node rank 0 silent", node_failure=True)
    return job_id


def test_the_scorecard_counts_refusals_preemptions_and_failures_per_place(
    stack: Settings, cli_api: list[str]
) -> None:
    owner = find_user(cli_api[3], stack)
    assert owner is not None
    _seed(stack, owner.user_id)
    _seed(stack, "u-someone-else")  # another user's history: not in this user's report

    as_json = _run("report", "providers", "--days", "7", "--json", *cli_api)
    table = _run("report", "providers", *cli_api)

    assert as_json.exit_code == 0, as_json.output
    card = json.loads(as_json.output)
    assert card["jobs_read"] == 1
    lines = {(x["cloud"], x["region"], x["family"]): x for x in card["lines"]}
    aws, gcp = lines[("aws", "us-east-1", "c6i")], lines[("gcp", "us-central1", "n2")]
    assert (aws["launch_requests"], aws["launches"], aws["capacity_refusals"], aws["other_refusals"]) == (
        4,
        1,
        2,
        1,
    )
    assert aws["refusal_rate"] == 0.75
    assert (
        abs(aws["median_seconds_to_running"] - 100) < 1
        and aws["node_failures"] == 1
        and aws["preemptions"] == 0
    )
    assert aws["percent_of_list"] == 100.0  # on-demand at list price
    assert (gcp["launch_requests"], gcp["preemptions"], gcp["warned_preemptions"]) == (1, 1, 1)
    assert abs(gcp["median_seconds_to_running"] - 400) < 1 and gcp["node_failures"] == 0
    assert gcp["spot_hours"] > 0 and gcp["preemptions_per_spot_hour"] == round(1 / gcp["spot_hours"], 4)
    assert table.exit_code == 0, table.output
    assert "What each provider delivered to your jobs of the last 30 day(s) (1 jobs)" in table.output
    row = next(r for r in table.output.splitlines() if "us-central1" in r)
    assert "1 (1)" in row  # one preemption, warned


def test_only_an_admin_reads_every_users_scorecard(stack: Settings, cli_api: list[str]) -> None:
    _seed(stack, "u-a")
    _seed(stack, "u-b")
    refused = _run("report", "providers", "--all-users", *cli_api)
    admin = ["--api-url", cli_api[1], "--api-key", create_user("lead", stack, admin=True)]
    across = _run("report", "providers", "--all-users", "--json", *admin)

    assert refused.exit_code != 0 and "admin" in refused.output and "Traceback" not in refused.output
    card = json.loads(across.output)
    assert card["all_users"] and card["jobs_read"] == 2
    gcp = next(x for x in card["lines"] if x["cloud"] == "gcp")
    assert gcp["preemptions"] == 2


def test_a_bad_days_value_is_a_400_naming_the_field(stack: Settings, cli_api: list[str]) -> None:
    import httpx

    answer = httpx.get(
        f"{cli_api[1]}/reports/providers",
        params={"days": "many"},
        headers={"Authorization": f"Bearer {cli_api[3]}"},
    )
    assert answer.status_code == 400 and "days" in answer.text


def test_the_dashboard_page_charts_the_places_to_the_signed_in_user(
    stack: Settings, cli_api: list[str]
) -> None:
    """In Chromium (Debian's package, driven by Playwright): sign in, open Providers, read the chart."""
    import os
    import re
    import shutil
    from pathlib import Path

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on this machine: apt-get install -y chromium (.ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    owner = find_user(cli_api[3], stack)
    assert owner is not None
    _seed(stack, owner.user_id)
    _seed(stack, "u-someone-else")
    root = Path(__file__).resolve().parents[2]
    artefacts = Path(os.environ.get("SKYLESS_TEST_ARTEFACTS") or root / "tmp" / "artefacts")
    artefacts.mkdir(parents=True, exist_ok=True)

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        try:
            page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
            page.goto(f"{cli_api[1]}/dashboard/providers")
            page.fill("#api_key", cli_api[3])
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/dashboard/providers$"))
            table = page.inner_text("table.providers")
            bars = page.locator("svg.chart rect title").all_text_contents()
            page.screenshot(path=str(artefacts / "dashboard-providers.png"), full_page=True)
            forbidden = page.goto(f"{cli_api[1]}/dashboard/providers?all_users=true")
        finally:
            browser.close()
    rows = {line.split("\t")[0] + "/" + line.split("\t")[1]: line for line in table.splitlines()[1:]}
    assert set(rows) == {"aws/us-east-1", "gcp/us-central1"}
    assert "\t4\t2\t1\t" in rows["aws/us-east-1"]  # asked, no capacity, other refused
    assert "1 (1)" in rows["gcp/us-central1"]
    assert "aws/us-east-1 c6i: 1 launched of 4 launch requests" in bars
    assert "aws/us-east-1 c6i: 2 no capacity of 4 launch requests" in bars
    assert "gcp/us-central1 n2: 1 launched of 1 launch requests" in bars
    assert forbidden is not None and forbidden.status == 403


def test_each_report_reads_the_refused_launches_of_the_refused_jobs_it_shows_only(
    stack: Settings, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[str] = []
    timeline = DynamoJobStore.timeline

    def counted(store: DynamoJobStore, partition: str) -> Any:
        read.append(partition)
        return timeline(store, partition)

    monkeypatch.setattr(DynamoJobStore, "timeline", counted)
    keys = {name: create_user(name, stack) for name in ("ann", "ben")}
    users = {name: find_user(key, stack).user_id for name, key in keys.items()}  # type: ignore[union-attr]
    for name in keys:
        seed_dynamo(stack, 150, owner=users[name])  # finished, never refused
    refused = {name: _seed(stack, users[name]) for name in keys}  # three refusals each
    old = _stored_before_the_mark(stack, f"hist-{users['ann']}-0000007")  # and one refusal noted then

    def report(key: str, *more: str) -> tuple[dict[str, Any], set[str]]:
        read.clear()
        answer = _run("report", "providers", "--json", *more, "--api-url", cli_api[1], "--api-key", key)
        assert answer.exit_code == 0, answer.output
        return json.loads(answer.output), {p for p in read if p.startswith(refusals_partition(""))}

    ann, partitions = report(keys["ann"])
    assert ann["jobs_read"] == 151 and partitions == {
        refusals_partition(refused["ann"]),
        refusals_partition(old),
    }
    aws = next(
        x for x in ann["lines"] if (x["cloud"], x["region"], x["family"]) == ("aws", "us-east-1", "c6i")
    )
    assert (aws["capacity_refusals"], aws["other_refusals"]) == (3, 1)  # her 2 + the old job's 1, her quota
    ben, partitions = report(keys["ben"])
    assert ben["jobs_read"] == 151 and partitions == {refusals_partition(refused["ben"])}

    admin = create_user("lead", stack, admin=True)
    everyone, partitions = report(admin, "--all-users")
    assert everyone["jobs_read"] == 302
    assert partitions == {refusals_partition(refused[name]) for name in keys} | {refusals_partition(old)}
    refused_to_ann = _run(
        "report", "providers", "--all-users", "--api-url", cli_api[1], "--api-key", keys["ann"]
    )
    assert refused_to_ann.exit_code != 0 and "admin" in refused_to_ann.output


def _stored_before_the_mark(stack: Settings, job_id: str) -> str:
    """`job_id` as a job stored before `refusals_noted` was kept (no such attribute), refused once for
    capacity then (noted beside its timeline with no mark, as it was)."""
    store = wiring_for(stack).store
    assert isinstance(store, DynamoJobStore)
    store.jobs._get_connection().update_item(job_id, actions=[store.jobs.refusals_noted.remove()])
    job = store.get(job_id)
    assert job is not None and job.refusals_noted is None
    candidate = _candidate("aws", "us-east-1", "c6i.2xlarge")
    store.note(refusals_partition(job_id), "refused", "refused", {
        "cloud": candidate.cloud, "region": candidate.region, "zone": None,
        "instance_type": candidate.instance_type, "use_spot": False, "error": "no capacity",
    })  # fmt: skip
    return job_id
