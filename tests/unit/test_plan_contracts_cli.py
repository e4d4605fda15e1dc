"""`skyless plan` with a team's contracts in `~/.sky/config.yaml`, as a user types it (typer's CliRunner,
a fresh HOME): the reserved machines win with the plan's words, a negotiated price wins where it should,
SkyPilot's reservation keys are honoured, and a bad contract is an error naming the key and the file,
without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app

TASK = "name: train\nresources:\n  accelerators: A100:8\nnum_nodes: 2\nrun: python train.py\n"
RESERVED = {
    "id": "cr-0a1b2c",
    "cloud": "aws",
    "zone": "us-east-1a",
    "instance_type": "p4d.24xlarge",
    "count": 8,
}


@pytest.fixture
def home(sky_home: Path) -> Path:
    return sky_home


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(TASK)
    return path


def configure(home: Path, config: dict[str, object]) -> Path:
    path = home / ".sky" / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def plan(task_file: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", str(task_file), *args], env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_reserved_capacity_wins_over_a_cheaper_list_price_and_the_plan_says_so(home: Path, task_file: Path):
    code, out, _ = plan(task_file, "--json")
    assert code == 0 and json.loads(out)["tasks"][0]["chosen"]["cloud"] == "lambda"  # list price

    path = configure(
        home, {"contracts": {"reservations": [RESERVED]}, "aws": {"prioritize_reservations": True}}
    )
    code, out, _ = plan(task_file, "--json")
    assert code == 0
    body = json.loads(out)
    chosen = body["tasks"][0]["chosen"]
    assert (chosen["cloud"], chosen["zone"], chosen["reservation"]) == ("aws", "us-east-1a", "cr-0a1b2c")
    assert chosen["hourly_price"] == 0 and chosen["list_price"] == pytest.approx(21.96)
    assert body["total_cost"] == 0
    assert any("reserved: 8 of 8 free in cr-0a1b2c" in n for n in body["contracts"])
    assert any(
        n.startswith(f"{path}: contracts: applied: 0 discount(s), 1 reservation(s)") for n in body["notes"]
    )
    assert any(f"{path}: aws.prioritize_reservations: applied" in n for n in body["notes"])

    code, out, _ = plan(task_file)  # the table a user reads
    assert code == 0
    assert "Contract task 'train': reserved: 8 of 8 free in cr-0a1b2c (aws p4d.24xlarge in us-east-1a)" in out
    assert "free reserved capacity in cr-0a1b2c, already paid; cheapest at list: lambda gpu_8x_a100" in out
    assert "Estimated total: $0.00" in out


def test_a_negotiated_discount_wins_where_it_should_and_the_plan_says_by_how_much(
    home: Path, task_file: Path
):
    configure(home, {"contracts": {"discounts": [{"cloud": "aws", "family": "p4d", "on_demand": 60}]}})
    code, out, _ = plan(task_file)
    assert code == 0
    assert "Contract task 'train': negotiated \u221260 % on aws p4d: $8.78/h instead of $21.96/h list" in out
    assert "Estimated total: $17.57" in out  # 2 nodes x $8.784/h

    configure(
        home, {"contracts": {"discounts": [{"cloud": "gcp", "on_demand": 60}]}}
    )  # GCP's A100s: still dearer
    code, out, _ = plan(task_file, "--json")
    assert json.loads(out)["tasks"][0]["chosen"]["cloud"] == "lambda"


def test_skypilots_specific_reservations_must_be_described(home: Path, task_file: Path):
    path = configure(home, {"aws": {"specific_reservations": ["cr-0a1b2c"]}})
    code, out, err = plan(task_file)
    assert code == 2 and "Traceback" not in out + err
    assert (
        f"{path}: aws.specific_reservations: 'cr-0a1b2c' is not described under contracts.reservations" in err
    )


def test_a_bad_contract_names_the_key_and_the_file(home: Path, task_file: Path):
    path = configure(home, {"contracts": {"reservations": [{**RESERVED, "count": "eight"}]}})
    code, out, _ = plan(task_file, "--json")
    assert code == 2
    error = json.loads(out)
    assert (error["file"], error["field"]) == (str(path), "contracts.reservations[0].count")


def test_a_launch_says_the_files_contracts_are_not_what_the_deployment_plans_with(home: Path):
    from cli.sky_config import apply_sky_config

    path = configure(
        home, {"contracts": {"reservations": [RESERVED]}, "aws": {"specific_reservations": ["cr-0a1b2c"]}}
    )
    applied = apply_sky_config(TASK, "train.yaml", None)  # as `launch`, `schedule` and the SDK call it
    assert not applied.contracts
    for key in ("contracts", "aws.specific_reservations"):
        assert any(
            n.startswith(f"{path}: {key}: read, not applied here: the deployment plans")
            for n in applied.notes
        )
