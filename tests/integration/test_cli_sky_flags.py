"""`sky`'s everyday flags typed at `skyless` (typer's CliRunner against the API over real HTTP on moto): an
inline command, task options landing in the task the job runs, --dryrun launching nothing, flags skyless
cannot honour accepted with a note, `jobs launch/queue/cancel -n`, `queue -s`, and refusals that name the
flag, the file and the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import cli_user_id
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.jobs.task_records import load_pipeline_of
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "200"}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def job_id_of(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output.split("Job ", 1)[1].split()[0]


def task_of(stack: Settings, job_id: str) -> object:
    wiring = wiring_for(stack)
    job = wiring.store.get(job_id)
    assert job is not None
    (task,) = load_pipeline_of(wiring, job).tasks
    return task


def test_an_inline_command_is_the_task_sky_cmd_runs(stack: Settings, cli_api: list[str]) -> None:
    result = run("launch", "-y", "-d", "nvidia-smi && echo done", *cli_api)
    task = task_of(stack, job_id_of(result))
    assert (task.name, task.run) == ("sky-cmd", "nvidia-smi && echo done")  # type: ignore[attr-defined]
    assert "Command to run: nvidia-smi && echo done" in result.output


def test_words_of_a_command_are_joined_as_sky_joins_them(stack: Settings, cli_api: list[str]) -> None:
    args = [
        "-y",
        "-d",
        "-n",
        "train",
        *cli_api,
        "--",
        "python",
        "train.py",
        "--epochs",
        "3",
    ]  # `--` as in sky
    result = run("jobs", "launch", *args)
    task = task_of(stack, job_id_of(result))
    assert (task.name, task.run) == ("train", "python train.py --epochs 3")  # type: ignore[attr-defined]


def test_task_options_land_in_the_task_the_job_runs(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print(1)\n")
    path = tmp_path / "task.yaml"
    path.write_text("name: from-file\nsetup: pip install torch\nrun: python train.py\n")
    result = run(
        "launch", str(path), "-n", "renamed", "--workdir", str(tmp_path / "code"), "--disk-size", "300",
        "--image-id", "ami-0abcdef1234567890", "--infra", "aws/us-east-1", "--ports", "8080", "--ports",
        "9000-9010", "--no-setup", "--job-recovery", "EAGER_NEXT_REGION", "-y", "-d", *cli_api,
    )  # fmt: skip
    task = task_of(stack, job_id_of(result))
    assert task.name == "renamed" and task.setup is None  # type: ignore[attr-defined]
    assert task.workdir == str((tmp_path / "code").resolve())  # type: ignore[attr-defined]
    resources = task.resources  # type: ignore[attr-defined]
    assert resources.disk_size == 300 and resources.image_id == "ami-0abcdef1234567890"
    assert resources.ports == [8080, "9000-9010"]
    assert "Uploading workdir" in result.output


def test_a_flag_skyless_does_not_act_on_gets_the_note_its_field_gets(
    stack: Settings, cli_api: list[str]
) -> None:
    result = run("launch", "-d", "--disk-tier", "high", "-r", "--detach-setup", "echo hi", *cli_api)
    job_id_of(result)
    assert "resources.disk_tier: read, not applied" in result.output
    assert "--retry-until-up: skyless always waits for capacity" in result.output
    assert "--detach-setup: setup always runs as part of the job" in result.output


def test_dryrun_shows_the_plan_and_submits_nothing(stack: Settings, cli_api: list[str]) -> None:
    result = run("launch", "--dryrun", "--cpus", "4+", "echo hi", *cli_api)
    assert result.exit_code == 0, result.output
    assert "place(s), best first" in result.output and "Dry run: nothing was launched" in result.output
    assert "Job " not in result.output
    assert wiring_for(stack).store.jobs_of(cli_user_id(cli_api, stack)) == []


def test_a_missing_workdir_is_refused_with_its_line_by_plan_and_launch(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("name: t\n\nworkdir: ~/no-such-project\nrun: echo hi\n")
    for verb in (["launch", "-d"], ["plan"]):
        result = run(*verb, str(path), *(cli_api if verb[0] == "launch" else []))
        assert result.exit_code == 2, result.output
        assert f"{path}:3: workdir: ~/no-such-project does not exist" in result.output
    bad_flag = run("launch", "-d", "--workdir", str(tmp_path / "nope"), "echo hi", *cli_api)
    assert bad_flag.exit_code == 2 and "--workdir:" in bad_flag.output
    assert wiring_for(stack).store.jobs_of(cli_user_id(cli_api, stack)) == []


def test_a_missing_yaml_file_is_an_error_not_a_command(cli_api: list[str], stack: Settings) -> None:
    result = run("launch", "-d", "traine.yaml", *cli_api)
    assert result.exit_code == 2 and "traine.yaml: no such task file" in result.output


def test_jobs_cancel_by_name_and_queue_skip_finished(stack: Settings, cli_api: list[str]) -> None:
    train = job_id_of(run("jobs", "launch", "-y", "-d", "-n", "train", "sleep 100", *cli_api))
    other = job_id_of(run("jobs", "launch", "-y", "-d", "-n", "train-2", "sleep 100", *cli_api))

    cancelled = run("jobs", "cancel", "-y", "-n", "train", *cli_api)
    assert cancelled.exit_code == 0, cancelled.output
    assert f"Job {train}: CANCELLED" in cancelled.output and other not in cancelled.output

    live = run("jobs", "queue", "-s", *cli_api)
    assert other in live.output and train not in live.output
    every = run("queue", "-a", *cli_api)
    assert other in every.output and train in every.output
    again = run("jobs", "cancel", "-y", "-n", "train", *cli_api)
    assert again.exit_code == 2 and "--name: no job named train that has not ended" in again.output


def test_all_users_is_accepted_and_says_why_it_shows_only_yours(stack: Settings, cli_api: list[str]) -> None:
    for verb in (["status", "-u"], ["queue", "-u"], ["jobs", "queue", "-u"]):
        result = run(*verb, *cli_api)
        assert result.exit_code == 0, result.output
        assert "--all-users: showing only yours" in result.output


def test_stop_and_down_with_all_and_yes_on_no_clusters(stack: Settings, cli_api: list[str]) -> None:
    for verb in ("stop", "down"):
        result = run(verb, "-a", "-y", *cli_api)
        assert result.exit_code == 0 and "No cluster to act on." in result.output, result.output
    refused = run("stop", *cli_api)
    assert refused.exit_code == 2 and "name the clusters, or --all" in refused.output


def test_a_bare_env_name_takes_its_value_from_the_shell_as_sky_does(
    stack: Settings, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_PROJECT", "from-my-shell")
    result = run("launch", "-d", "--env", "WANDB_PROJECT", "echo $WANDB_PROJECT", *cli_api)
    task = task_of(stack, job_id_of(result))
    assert task.envs["WANDB_PROJECT"] == "from-my-shell"  # type: ignore[attr-defined]
    monkeypatch.delenv("WANDB_PROJECT")
    unset = run("launch", "-d", "--env", "WANDB_PROJECT", "echo hi", *cli_api)
    assert (
        unset.exit_code == 2
        and "--env: expected K=V, or the name of a variable set in this shell" in unset.output
    )
