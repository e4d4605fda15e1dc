"""Two teams' contracts in one deployment (moto's server, the real tenancy table): each team's jobs are
planned into its own reservation and never the other's, a user of no team gets only the deployment's
discount, `cost-report` shows a user only the reservations their teams may use, and a bad team section is
an error naming `teams.<name>.` and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app as cli
from shared.config import Settings
from shared.config.env_names import ENV_CONTRACTS_FILE
from shared.errors import UserError
from shared.jobs.planning import plan_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.optimizer import Candidate
from shared.store import tenancy
from shared.store.users import find_user
from shared.wiring import wiring_for

TASK = "name: serve\nnum_nodes: 2\nresources:\n  instance_type: m6i.large\nrun: python serve.py\n"


def reservation(ident: str, zone: str) -> dict[str, object]:
    return {"id": ident, "cloud": "aws", "zone": zone, "instance_type": "m6i.large", "count": 4}


@pytest.fixture
def contracts_file(stack: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "contracts.yaml"
    path.write_text(yaml.safe_dump({
        "contracts": {"discounts": [{"cloud": "aws", "on_demand": 10}]},
        "teams": {
            "ml": {"contracts": {"reservations": [reservation("cr-ml", "us-east-1b")]}},
            "cv": {"contracts": {"reservations": [reservation("cr-cv", "us-east-1c")]}},
        },
    }))  # fmt: skip
    monkeypatch.setenv(ENV_CONTRACTS_FILE, str(path))
    for team, member in (("ml", "u-alice"), ("cv", "u-bob")):
        assert tenancy.create_team(stack, team, by="test")
        assert tenancy.add_member(stack, team, member, by="test")
    return path


def chosen_for(stack: Settings, owner: str) -> Candidate:
    wiring = wiring_for(stack)
    job = submit_job(wiring, SubmitJob.from_text(owner=owner, task_text=TASK, filename="serve.yaml"))
    stored = wiring.store.get(job.job_id)
    assert stored is not None
    plan = plan_of(stored)
    assert plan is not None
    assert all(
        c.reservation in (None, *_own(owner)) for c in plan.tasks[0].candidates
    )  # never another team's
    return plan.tasks[0].chosen


def _own(owner: str) -> tuple[str, ...]:
    return {"u-alice": ("cr-ml",), "u-bob": ("cr-cv",)}.get(owner, ())


def test_each_team_is_planned_into_its_own_reservation_and_nobody_into_another_teams(
    stack: Settings, contracts_file: Path
) -> None:
    alice, bob, carol = (chosen_for(stack, owner) for owner in ("u-alice", "u-bob", "u-carol"))
    assert (alice.reservation, alice.zone) == ("cr-ml", "us-east-1b")
    assert (bob.reservation, bob.zone) == ("cr-cv", "us-east-1c")
    assert carol.reservation is None and carol.list_price is not None  # the deployment's discount only
    assert carol.hourly_price == pytest.approx(carol.list_price * 0.9)


def test_cost_report_shows_a_user_only_the_reservations_their_teams_may_use(
    stack: Settings, contracts_file: Path, cli_api: list[str]
) -> None:
    user = find_user(cli_api[3], stack)
    assert user is not None
    assert tenancy.add_member(stack, "cv", user.user_id, by="test")
    body = json.loads(CliRunner().invoke(cli, ["cost-report", "--json", *cli_api]).output)
    assert [r["reservation"] for r in body["reservations"]] == ["cr-cv"]


def test_a_bad_team_section_names_the_team_and_the_key(stack: Settings, contracts_file: Path) -> None:
    bad = {
        "teams": {"ml": {"contracts": {"reservations": [{**reservation("cr-ml", "us-east-1b"), "count": 0}]}}}
    }
    contracts_file.write_text(yaml.safe_dump(bad))
    with pytest.raises(UserError) as caught:
        chosen_for(stack, "u-alice")
    assert caught.value.file == str(contracts_file)
    assert caught.value.field == "teams.ml.contracts.reservations[0].count"


def test_launch_dryrun_shows_the_plan_at_the_callers_contracts(
    stack: Settings, contracts_file: Path, cli_api: list[str], tmp_path: Path
) -> None:
    user = find_user(cli_api[3], stack)
    assert user is not None
    assert tenancy.add_member(stack, "ml", user.user_id, by="test")
    task = tmp_path / "serve.yaml"
    task.write_text(TASK)
    result = CliRunner().invoke(
        cli, ["launch", str(task), "--dryrun", "-y", *cli_api], env={"COLUMNS": "220"}
    )
    assert result.exit_code == 0, result.output
    assert "note: task 'serve': reserved: 4 of 4 free in cr-ml (aws m6i.large in us-east-1b)" in result.output
    assert "Estimated cost: $0.00. Dry run" in result.output
