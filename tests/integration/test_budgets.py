"""Budgets against moto: a cost cap set with `skyless launch --max-cost` as a user types it; the sweep's
notices at 50/80/100 % each written once (twice swept, one notice each); at the cap the node's next report is
answered `preempt`, its `preempting` report ends the job CANCELLED with the arithmetic; a monthly budget set
with `skyless budget set` refuses the next launch with the arithmetic; two users' budgets stay apart."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.jobs.budget_checks import BudgetSweep
from shared.jobs.tokens import agent_token
from shared.states import JobState
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "220"}
TASK = "name: capped\nresources:\n  cpus: 2\n  use_spot: true\nrun: sleep 1000\n"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def _running(stack: Settings, job_id: str, *, price: float, hours: float) -> None:
    """The job's attempt 0 launched `hours` ago at `price` $/h on one node `i-budget`, now RUNNING."""
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert job is not None
    cluster = store.new_cluster(
        cluster_id=f"{job_id}-0", job_id=job_id, attempt=0, provider="local", cloud="aws", region="us-east-1",
        zone=None, instance_type="c6i.large", use_spot=True, hourly_price=price, num_nodes=1, state="UP",
        nodes={"i-budget": {"rank": 0, "ip": "127.0.0.2", "phase": "running", "heartbeat_at": time.time()}},
        launched_at=time.time() - hours * 3600,
    )  # fmt: skip
    assert store.move(job, JobState.SETTING_UP, "launched", changes={"cluster_id": cluster.cluster_id},
                      also_save=[cluster])  # fmt: skip
    assert store.move(job, JobState.RUNNING, "every node is running")


def _report(api_url: str, stack: Settings, job_id: str, phase: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {agent_token(stack, job_id, 0)}"}
    answer = httpx.post(f"{api_url}/agent/{job_id}/status", headers=headers,
                        json={"instance_id": "i-budget", "phase": phase})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _launch(cli_api: list[str], tmp_path: Path, *extra: str) -> Result:
    path = tmp_path / "capped.yaml"
    path.write_text(TASK)
    return _run("launch", str(path), "--detach", *extra, *cli_api)


def test_a_cost_cap_notifies_once_per_threshold_then_stops_the_job_through_the_preemption_notice(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    launched = _launch(cli_api, tmp_path, "--max-cost", "0.10")
    assert launched.exit_code == 0, launched.output
    assert "Cost cap $0.10 (skyless only; SkyPilot has none)" in launched.output
    job_id = re.search(r"Job (job-\w+) submitted", launched.output).group(1)  # type: ignore[union-attr]
    wiring = wiring_for(stack)

    _running(stack, job_id, price=0.06, hours=1.0)  # $0.06 of $0.10: 60 %
    first = BudgetSweep(wiring, time.time()).check(wiring.store.get(job_id))  # type: ignore[arg-type]
    again = BudgetSweep(wiring, time.time()).check(wiring.store.get(job_id))  # type: ignore[arg-type]
    assert first is None and again is None
    assert _report(cli_api[1], stack, job_id, "heartbeat").get("preempt") is None

    cluster = wiring.store.cluster(f"{job_id}-0")
    assert cluster is not None
    cluster.update(actions=[type(cluster).launched_at.set(time.time() - 2 * 3600)])  # now $0.12: 120 %
    for _ in range(2):  # a sweep delivered twice
        BudgetSweep(wiring, time.time()).check(wiring.store.get(job_id))  # type: ignore[arg-type]
    job = wiring.store.get(job_id)
    assert job is not None and job.state == "RUNNING" and "cost cap" in (job.budget_stop or "")

    notices = [e for e in wiring.store.timeline(job_id) if e.kind == "budget"]
    assert [int(e.detail["percent"]) for e in notices] == [50, 80, 100]  # type: ignore[index]
    assert (
        "100 % reached ($0.12" in notices[-1].message
        and "stopping the job at a checkpoint" in notices[-1].message
    )

    status = _run("status", job_id, *cli_api)
    assert "cost cap: $0.10" in status.output and "stopping: cost cap" in status.output, status.output
    told = _report(cli_api[1], stack, job_id, "heartbeat")
    assert "cost cap of job" in str(told["preempt"]) and told["stop"] is False
    _report(cli_api[1], stack, job_id, "preempting")  # the node wrote back, then let go

    job = wiring.store.get(job_id)
    assert job is not None and job.state == "CANCELLED"
    assert job.reason and job.reason.startswith(f"cost cap of job {job_id} reached: spent $0.12")
    assert job.recoveries == 0  # ended, not recovered


def test_warn_only_goes_on_past_the_cap(stack: Settings, cli_api: list[str], tmp_path: Path) -> None:
    launched = _launch(cli_api, tmp_path, "--max-cost", "0.01", "--max-cost-action", "warn")
    job_id = re.search(r"Job (job-\w+) submitted", launched.output).group(1)  # type: ignore[union-attr]
    wiring = wiring_for(stack)
    _running(stack, job_id, price=0.05, hours=1.0)
    assert BudgetSweep(wiring, time.time()).check(wiring.store.get(job_id)) == "warned"  # type: ignore[arg-type]
    job = wiring.store.get(job_id)
    assert job is not None and job.state == "RUNNING" and job.budget_stop is None
    assert "warning only" in [e for e in wiring.store.timeline(job_id) if e.kind == "budget"][-1].message


def test_a_spent_monthly_budget_refuses_the_next_launch_with_the_arithmetic(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    other = ["--api-url", cli_api[1], "--api-key", create_user("bob", stack)]
    first = _launch(cli_api, tmp_path)
    job_id = re.search(r"Job (job-\w+) submitted", first.output).group(1)  # type: ignore[union-attr]
    _running(stack, job_id, price=0.5, hours=1.0)

    set_budget = _run("budget", "set", "--monthly", "0.40", *cli_api)
    refused = _launch(cli_api, tmp_path)
    bobs = _launch(other, tmp_path)  # another user's budget is not this one
    shown = _run("budget", "show", "--json", *cli_api)
    not_mine = _run("budget", "set", "--monthly", "1000", "--user", "u-bob", *cli_api)

    assert set_budget.exit_code == 0 and "monthly budget $0.40" in set_budget.output, set_budget.output
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    text = " ".join(refused.output.split())
    assert re.search(r"monthly budget of \d{4}-\d\d reached: spent \$0\.50\d* \(ended attempts \$0\.0000 \+ "
                     r"running \$0\.50\d*\) of \$0\.4000", text), text  # fmt: skip
    assert bobs.exit_code == 0, bobs.output
    assert json.loads(shown.output)["percent"] >= 125
    assert not_mine.exit_code != 0 and "admin" in not_mine.output

    owner = find_user(cli_api[3], stack)
    assert owner is not None
    admin = ["--api-url", cli_api[1], "--api-key", create_user("lead", stack, admin=True)]
    raised = _run("budget", "set", "--monthly", "10", "--user", owner.user_id, *admin)
    assert raised.exit_code == 0, raised.output
    assert _launch(cli_api, tmp_path).exit_code == 0


def test_the_sdk_launch_carries_a_cost_cap(
    stack: Settings, cli_api: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skyless

    (tmp_path / "home" / ".sky").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    skyless.api_login(cli_api[1], cli_api[3])
    try:
        task = skyless.Task(name="sdk-capped", run="echo hi")
        task.set_resources(skyless.Resources(cpus="1+"))
        job_id, _ = skyless.jobs.launch(task, max_cost=2.5, max_cost_action="warn")
    finally:
        skyless.api_login(None, None)
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and float(job.max_cost) == 2.5 and job.max_cost_action == "warn"


def test_cost_report_shows_the_monthly_budget(stack: Settings, cli_api: list[str], tmp_path: Path) -> None:
    first = _launch(cli_api, tmp_path)
    job_id = re.search(r"Job (job-\w+) submitted", first.output).group(1)  # type: ignore[union-attr]
    _running(stack, job_id, price=0.5, hours=1.0)
    assert _run("budget", "set", "--monthly", "2", "--action", "warn", *cli_api).exit_code == 0
    report = _run("cost-report", *cli_api)
    assert report.exit_code == 0, report.output
    line = " ".join(report.output.split())
    assert re.search(
        r"Monthly budget \d{4}-\d\d: \$2\.0000, spent \$0\.50\d* \(25\.\d %\), at 100 %: warn", line
    ), line


def test_the_dashboards_costs_page_shows_the_signed_in_users_budget(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    from chalice.test import Client
    from test_dashboard_pages import Browser

    from functions.submit.app import app

    assert _run("budget", "set", "--monthly", "3", *cli_api).exit_code == 0
    with Client(app) as client:
        browser = Browser(client)
        browser.sign_in(cli_api[3])
        page = browser.get("/dashboard/costs").body.decode()
    assert "Monthly budget" in page and "$3.0000" in page and "at 100 %: stop" in page, page[:3000]
