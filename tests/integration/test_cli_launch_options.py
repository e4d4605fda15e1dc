"""`skyless launch | status | queue | cancel` with the options a SkyPilot user types, through typer's
CliRunner against the API served over real HTTP on moto: --secret for null secrets (never in a table),
resource overrides in the submitted task, the size limit before any upload, notes said once, --json,
several job ids and --all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_user_id
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.jobs.task_records import load_pipeline_of, secrets_of
from shared.task.limits import MAX_TASK_FILE_BYTES
from shared.wiring import wiring_for

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"
WIDE = {"COLUMNS": "200"}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def job_id_of(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output.split("Job ", 1)[1].split()[0]


def test_a_null_secret_is_given_with_secret_and_kept_out_of_the_jobs_table(
    stack: Settings, cli_api: list[str]
) -> None:
    refused = run("launch", str(FILES / "null_secret.yaml"), "-d", *cli_api)
    assert refused.exit_code == 2 and "secrets.HF_TOKEN" in refused.output and "Job " not in refused.output

    result = run(
        "launch", str(FILES / "null_secret.yaml"), "--secret", "HF_TOKEN=hf_abc", "--secret",
        "WANDB_API_KEY=wb_xyz", "-d", *cli_api,
    )  # fmt: skip
    job_id = job_id_of(result)

    wiring = wiring_for(stack)
    job = wiring.store.get(job_id)
    assert job is not None
    assert "hf_abc" not in json.dumps(job.attribute_values, default=str)
    assert secrets_of(wiring, job, 0) == {"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "wb_xyz"}
    assert "hf_abc" not in result.output


def test_resource_overrides_are_in_the_task_the_job_runs(stack: Settings, cli_api: list[str]) -> None:
    result = run(
        "launch", str(FILES / "cpu_4_no_memory.yaml"), "--cpus", "2+", "--num-nodes", "2",
        "--infra", "aws/us-east-1", "-d", *cli_api,
    )  # fmt: skip
    job_id = job_id_of(result)

    wiring = wiring_for(stack)
    job = wiring.store.get(job_id)
    assert job is not None
    (task,) = load_pipeline_of(wiring, job).tasks
    assert (task.num_nodes, task.resources.cpus, task.resources.infra) == (2, "2+", "aws/us-east-1")


def test_a_task_file_over_the_limit_is_refused_before_any_upload_or_request(
    tmp_path: Path, cli_api: list[str], stack: Settings
) -> None:
    (tmp_path / "code").mkdir()
    path = tmp_path / "big.yaml"
    path.write_text(f"name: big\nworkdir: {tmp_path / 'code'}\nrun: |\n" + "  echo 0123456789abcdef\n" * (
        MAX_TASK_FILE_BYTES // 20
    ))  # fmt: skip
    result = run("launch", str(path), "-d", *cli_api)
    assert result.exit_code == 2
    assert str(path) in result.output and "256 KiB" in result.output
    assert "Uploading" not in result.output
    assert wiring_for(stack).store.jobs_of(cli_user_id(cli_api, stack)) == []


def test_fields_not_acted_on_are_said_once_at_launch_and_in_status(
    stack: Settings, cli_api: list[str]
) -> None:
    result = run("launch", str(FILES / "every_ignored_field.yaml"), "-d", *cli_api)
    job_id = job_id_of(result)
    assert result.output.count("resources.disk_tier: read,") == 1
    assert result.output.index("resources.disk_tier") < result.output.index("Job ")

    status = run("status", job_id, *cli_api)
    assert status.exit_code == 0 and status.output.count("resources.disk_tier: read,") == 1
    detail = json.loads(run("status", job_id, "--json", *cli_api).output)
    assert detail["job_id"] == job_id
    assert any("event_callback: read," in n for e in detail["timeline"] for n in e["detail"].get("notes", []))


def test_queue_json_lists_the_jobs(cli_api: list[str], stack: Settings) -> None:
    first = job_id_of(run("launch", str(FILES / "cpu_default.yaml"), "-d", *cli_api))
    second = job_id_of(run("launch", str(FILES / "cpu_default.yaml"), "-d", *cli_api))
    jobs = json.loads(run("queue", "--json", *cli_api).output)
    assert {j["job_id"] for j in jobs} == {first, second}
    assert all(j["state"] == "PLANNED" for j in jobs)  # planned at submit; no dispatcher runs here


def test_cancel_takes_several_ids_and_all(cli_api: list[str], stack: Settings) -> None:
    ids = [job_id_of(run("launch", str(FILES / "cpu_default.yaml"), "-d", *cli_api)) for _ in range(3)]

    some = run("cancel", ids[0], ids[1], *cli_api)
    assert some.exit_code == 0, some.output
    assert some.output.count("CANCELLED") == 2

    rest = run("cancel", "--all", *cli_api)
    assert rest.exit_code == 0 and ids[2] in rest.output and ids[0] not in rest.output
    states = {j["job_id"]: j["state"] for j in json.loads(run("queue", "--json", *cli_api).output)}
    assert set(states.values()) == {"CANCELLED"}

    assert run("cancel", *cli_api).exit_code == 2
    unknown = run("cancel", "job-000000000000", ids[0], *cli_api)
    assert unknown.exit_code == 2 and "job-000000000000" in unknown.output and "CANCELLED" in unknown.output


@pytest.mark.parametrize("flag", ["--gpus", "--cpus", "--infra"])
def test_a_bad_override_is_refused_naming_the_option(flag: str, cli_api: list[str]) -> None:
    value = {"--gpus": "A100:x", "--cpus": "many", "--infra": "nocloud"}[flag]
    result = run("launch", str(FILES / "cpu_default.yaml"), flag, value, "-d", *cli_api)
    assert result.exit_code == 2 and flag in result.output and "Job " not in result.output
