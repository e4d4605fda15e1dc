"""Team budgets against moto, through the API over real HTTP and the CLI as a user types it (issue 23 item 3).

Two teams on one stack: alice and carol in `ml`, bob in `nlp`, and a stack admin. Only an admin key sets a
team's budget; a member reads their own team's; a member of one team can neither read nor set the other's
(by the API and by the CLI). The team's spend is its members' together: alice's running job spends the budget,
carol's next launch is refused with the arithmetic, bob's (another team) is not. The sweep notifies each
member with a live job once per threshold and stops every member's job through the preemption notice."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from test_budgets import _launch, _report, _run, _running

from shared.config import Settings
from shared.jobs.budget_checks import BudgetSweep
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for


@dataclass
class Teams:
    url: str
    ids: dict[str, str]
    admin: list[str]  # CLI flags: --api-url, --api-key
    alice: list[str]
    carol: list[str]
    bob: list[str]
    keys: dict[str, str]

    def api(self, who: str, method: str, path: str, **kwargs: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.keys[who]}"}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def teams(stack: Settings, cli_api: list[str]) -> Teams:
    url = cli_api[1]
    keys = {"admin": create_user("lead", stack, admin=True), "alice": cli_api[3]}
    keys |= {name: create_user(name, stack) for name in ("carol", "bob")}
    flags = {name: ["--api-url", url, "--api-key", key] for name, key in keys.items()}
    ids = {name: find_user(key, stack).user_id for name, key in keys.items()}  # type: ignore[union-attr]
    for team, members in (("ml", ("alice", "carol")), ("nlp", ("bob",))):
        assert _run("admin", "teams", "create", team, *flags["admin"]).exit_code == 0
        for member in members:
            added = _run("admin", "teams", "add", team, ids[member], *flags["admin"])
            assert added.exit_code == 0, added.output
    return Teams(url, ids, flags["admin"], flags["alice"], flags["carol"], flags["bob"], keys)


def _job_id(output: str) -> str:
    return re.search(r"Job (job-\w+) submitted", output).group(1)  # type: ignore[union-attr]


def test_a_member_of_one_team_can_neither_read_nor_set_another_teams_budget(teams: Teams) -> None:
    assert _run("budget", "set", "--team", "nlp", "--monthly", "100", *teams.admin).exit_code == 0
    assert _run("budget", "set", "--team", "ml", "--monthly", "50", *teams.admin).exit_code == 0

    read_other = _run("budget", "show", "--team", "nlp", *teams.alice)
    set_other = _run("budget", "set", "--team", "nlp", "--monthly", "1", *teams.alice)
    set_own = _run("budget", "set", "--team", "ml", "--monthly", "1000", *teams.alice)  # a member, no admin
    assert read_other.exit_code != 0 and "no team nlp" in read_other.output, read_other.output
    assert "100" not in read_other.output and "Traceback" not in read_other.output
    assert set_other.exit_code != 0 and "admin key" in set_other.output, set_other.output
    assert set_own.exit_code != 0 and "admin key" in set_own.output, set_own.output

    assert teams.api("alice", "GET", "/budget", params={"team": "nlp"}).status_code == 404
    assert teams.api("alice", "GET", "/budget", params={"team": "nope"}).status_code == 404
    assert teams.api("alice", "PUT", "/budget", json={"team": "nlp", "monthly": 1}).status_code == 403
    assert teams.api("bob", "PUT", "/budget", json={"team": "ml", "monthly": 1}).status_code == 403
    bobs = teams.api("bob", "GET", "/budget", params={"team": "ml"})
    assert bobs.status_code == 404 and "50" not in bobs.text

    own = _run("budget", "show", "--team", "nlp", *teams.bob)
    assert own.exit_code == 0 and "team nlp" in own.output, own.output
    assert "monthly budget $100.00" in own.output, own.output
    mine = teams.api("alice", "GET", "/budget").json()  # a user's answer carries their teams' budgets only
    assert [(t["team"], t["monthly"]) for t in mine["teams"]] == [("ml", 50.0)]
    assert teams.api("admin", "PUT", "/budget", json={"team": "nope", "monthly": 1}).status_code == 404


def test_a_teams_admin_sets_its_budget_and_no_other_teams(teams: Teams) -> None:
    made = _run("admin", "teams", "add", "ml", teams.ids["carol"], "--team-admin", *teams.admin)
    assert made.exit_code == 0 and "(its admin)" in made.output, made.output

    own = _run("budget", "set", "--team", "ml", "--monthly", "300", *teams.carol)
    assert own.exit_code == 0 and "monthly budget $300.00" in own.output, own.output
    other = _run("budget", "set", "--team", "nlp", "--monthly", "1", *teams.carol)
    assert other.exit_code != 0 and "admin" in other.output, other.output
    assert teams.api("carol", "PUT", "/budget", json={"team": "nlp", "monthly": 1}).status_code == 403
    assert teams.api("alice", "PUT", "/budget", json={"team": "ml", "monthly": 1}).status_code == 403

    demoted = _run("admin", "teams", "add", "ml", teams.ids["carol"], "--no-team-admin", *teams.admin)
    assert demoted.exit_code == 0, demoted.output
    assert teams.api("carol", "PUT", "/budget", json={"team": "ml", "monthly": 1}).status_code == 403
    shown = teams.api("alice", "GET", "/budget", params={"team": "ml"}).json()
    assert shown["monthly"] == 300.0  # what carol set as its admin stands


def test_a_spent_team_budget_refuses_a_teammates_launch_with_the_arithmetic(
    stack: Settings, teams: Teams, tmp_path: Path
) -> None:
    alices = _job_id(_launch(teams.alice, tmp_path).output)
    _running(stack, alices, price=0.5, hours=1.0)
    assert _run("budget", "set", "--team", "ml", "--monthly", "0.40", *teams.admin).exit_code == 0

    refused = _launch(teams.carol, tmp_path)
    said = " ".join(refused.output.split())
    assert refused.exit_code != 0 and "Traceback" not in said
    assert re.search(r"monthly budget of team ml for \d{4}-\d\d reached: spent \$0\.50\d* \(ended attempts "
                     r"\$0\.0000 \+ running \$0\.50\d*\) of \$0\.4000", said), said  # fmt: skip
    assert _launch(teams.bob, tmp_path).exit_code == 0  # another team's budget is not this one

    report = " ".join(_run("cost-report", *teams.carol).output.split())
    assert re.search(r"Monthly budget of team ml \d{4}-\d\d: \$0\.4000, spent \$0\.50\d* \(12\d\.\d %\), at "
                     r"100 %: stop", report), report  # fmt: skip

    assert _run("budget", "set", "--team", "ml", "--monthly", "10", *teams.admin).exit_code == 0
    assert _launch(teams.carol, tmp_path).exit_code == 0


def test_the_sweep_notifies_each_member_once_and_stops_every_members_job_at_a_checkpoint(
    stack: Settings, teams: Teams, tmp_path: Path
) -> None:
    alices = _job_id(_launch(teams.alice, tmp_path).output)
    carols = _job_id(_launch(teams.carol, tmp_path).output)
    bobs = _job_id(_launch(teams.bob, tmp_path).output)
    for job_id in (alices, carols, bobs):
        _running(stack, job_id, price=0.3, hours=1.0)  # ml: $0.60 together
    assert _run("budget", "set", "--team", "ml", "--monthly", "0.5", *teams.admin).exit_code == 0
    wiring = wiring_for(stack)
    for _ in range(2):  # a sweep delivered twice
        sweep = BudgetSweep(wiring, time.time())
        verdicts = {job_id: sweep.check(wiring.store.get(job_id)) for job_id in (alices, carols, bobs)}  # type: ignore[arg-type]
    assert verdicts[bobs] is None

    for job_id in (alices, carols):
        job = wiring.store.get(job_id)
        assert job is not None and (job.budget_stop or "").startswith("monthly budget of team ml for "), job
        notices = [e for e in wiring.store.timeline(job_id) if e.kind == "budget"]
        assert [int(e.detail["percent"]) for e in notices] == [50, 80, 100], notices  # type: ignore[index]
        assert "team ml" in notices[-1].message and "stopping the job at a checkpoint" in notices[-1].message
        assert "monthly budget of team ml" in str(_report(teams.url, stack, job_id, "heartbeat")["preempt"])
        _report(teams.url, stack, job_id, "preempting")  # the node wrote back, then let go
        job = wiring.store.get(job_id)
        assert job is not None and job.state == "CANCELLED" and job.recoveries == 0
        assert re.match(r"monthly budget of team ml for \d{4}-\d\d reached: spent \$0\.60", job.reason or "")
    bob = wiring.store.get(bobs)
    assert bob is not None and bob.state == "RUNNING" and not bob.budget_stop
    assert not [e for e in wiring.store.timeline(bobs) if e.kind == "budget"]

    status = _run("status", alices, *teams.alice)
    assert "monthly budget of team ml" in " ".join(status.output.split()), status.output


def test_a_warn_only_team_budget_lets_running_jobs_go_on(
    stack: Settings, teams: Teams, tmp_path: Path
) -> None:
    alices = _job_id(_launch(teams.alice, tmp_path).output)
    _running(stack, alices, price=0.3, hours=1.0)
    set_warn = _run("budget", "set", "--team", "ml", "--monthly", "0.2", "--action", "warn", *teams.admin)
    assert set_warn.exit_code == 0, set_warn.output
    wiring = wiring_for(stack)
    assert BudgetSweep(wiring, time.time()).check(wiring.store.get(alices)) == "warned"  # type: ignore[arg-type]
    job = wiring.store.get(alices)
    assert job is not None and job.state == "RUNNING" and job.budget_stop is None
    assert "warning only" in [e for e in wiring.store.timeline(alices) if e.kind == "budget"][-1].message


def test_the_dashboards_costs_page_shows_the_members_team_budget(teams: Teams) -> None:
    from chalice.test import Client
    from test_dashboard_pages import Browser

    from functions.submit.app import app

    assert _run("budget", "set", "--team", "ml", "--monthly", "7", *teams.admin).exit_code == 0
    assert _run("budget", "set", "--team", "nlp", "--monthly", "9", *teams.admin).exit_code == 0
    with Client(app) as client:
        browser = Browser(client)
        browser.sign_in(teams.keys["carol"])
        page = browser.get("/dashboard/costs").body.decode()
    assert "Monthly budget of team ml" in page and "$7.0000" in page, page[:3000]
    assert "team nlp" not in page and "$9.0000" not in page
