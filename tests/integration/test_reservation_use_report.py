"""`skyless cost-report` shows each of the deployment's reservations over the window: node-hours paid for
(its count through the part of its term inside the window), used by jobs that ran in it, and idle, with
the idle hours' cost; through `GET /costs` over real HTTP, as a user types the command."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app as cli
from shared.config import Settings
from shared.config.env_names import ENV_CONTRACTS_FILE
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.store.users import find_user
from shared.wiring import wiring_for

HOUR = 3600.0
TASK = "name: serve\nnum_nodes: 2\nresources:\n  instance_type: m6i.large\nrun: python serve.py\n"


def reserved_job(stack: Settings, owner: str, hours: float, zone: str) -> str:
    """A finished 2-node job that ran `hours` in `zone` at $0/h on-demand: a reserved candidate."""
    store = wiring_for(stack).store
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner=owner, task_text=TASK)).job_id
    record = store.get(job_id)
    assert record is not None
    now = time.time()
    store.new_cluster(
        cluster_id=f"{job_id}-0", job_id=job_id, attempt=0, provider="local", cloud="aws", region="us-east-1",
        zone=zone, instance_type="m6i.large", use_spot=False, hourly_price=0.0, num_nodes=2,
        state="TERMINATED", launched_at=now - hours * HOUR - 60, terminated_at=now - 60,
    ).save()  # fmt: skip
    for state in (JobState.PROVISIONING, JobState.SETTING_UP, JobState.RUNNING, JobState.SUCCEEDED):
        if record.state != state.value:
            assert store.move(record, state, state.value.lower(), changes={"cluster_id": f"{job_id}-0"})
    return job_id


def test_cost_report_shows_reserved_hours_used_and_paid_for_but_idle(
    stack: Settings, cli_api: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = datetime.fromtimestamp(time.time() - 10 * HOUR, UTC).isoformat()
    contracts = {"contracts": {"reservations": [
        {"id": "cr-0feed", "cloud": "aws", "zone": "us-east-1b", "instance_type": "m6i.large", "count": 4,
         "start": started, "hourly_price": 0.1},
    ]}}  # fmt: skip
    path = tmp_path / "contracts.yaml"
    path.write_text(yaml.safe_dump(contracts))
    monkeypatch.setenv(ENV_CONTRACTS_FILE, str(path))
    user = find_user(cli_api[3], stack)
    assert user is not None
    reserved_job(stack, user.user_id, hours=3, zone="us-east-1b")
    reserved_job(stack, user.user_id, hours=5, zone="us-east-1a")  # $0/h elsewhere: not in this reservation

    result = CliRunner().invoke(cli, ["cost-report", *cli_api], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert "Reserved capacity in the window, used by your jobs only" in result.output
    row = next(line for line in result.output.splitlines() if "cr-0feed" in line)
    # paid: 4 nodes x 10 h of term in the window; used: 2 nodes x 3 h; idle 34 node-h x $0.10
    assert (
        "aws/us-east-1b" in row and "40.0" in row and "6.0 (15%)" in row and "34.0" in row and "$3.40" in row
    )

    body = json.loads(CliRunner().invoke(cli, ["cost-report", "--json", *cli_api]).output)
    (use,) = body["reservations"]
    assert use["reservation"] == "cr-0feed" and use["used_hours"] == pytest.approx(6.0, abs=0.01)
    assert use["paid_hours"] == pytest.approx(40.0, abs=0.01) and use["idle_cost"] == pytest.approx(
        3.4, abs=0.01
    )
