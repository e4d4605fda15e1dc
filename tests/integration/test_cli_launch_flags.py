"""The `sky launch` flags that used to stop a SkyPilot script with "No such option", typed at `skyless`
(typer's CliRunner against the API over real HTTP on moto): `--git-url/--git-ref` make the workdir a git
checkout by SkyPilot's rules, `--config` lays a call's SkyPilot config over ~/.sky/config.yaml with the same
notes, `--wait-for` takes jobs_and_ssh on launch and start as on autostop, and `--clone-disk-from` is refused
with its reason. A refusal names the flag and submits nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_user_id
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.jobs.task_records import load_pipeline_of
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "200"}
REPO = "https://github.com/org/repo.git"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def submitted_task(stack: Settings, result: Result) -> object:
    assert result.exit_code == 0, result.output
    job_id = result.output.split("Job ", 1)[1].split()[0]
    wiring = wiring_for(stack)
    job = wiring.store.get(job_id)
    assert job is not None
    (task,) = load_pipeline_of(wiring, job).tasks
    return task


def nothing_submitted(stack: Settings, cli_api: list[str]) -> bool:
    user_id = cli_user_id(cli_api, stack)
    return wiring_for(stack).store.jobs_of(user_id) == [] and ClusterStore(stack).clusters_of(user_id) == []


def workdir_of(task: object) -> tuple[str, str | None]:
    workdir = task.workdir  # type: ignore[attr-defined]
    return workdir.url, workdir.ref


def test_git_url_and_ref_make_the_workdir_a_checkout_as_sky_does(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    inline = run("launch", "-y", "-d", "--git-url", REPO, "--git-ref", "v1", "python train.py", *cli_api)
    assert workdir_of(submitted_task(stack, inline)) == (REPO, "v1")
    assert "Uploading workdir" not in inline.output  # a clone on the node: nothing to upload

    (tmp_path / "code").mkdir()
    local = tmp_path / "local.yaml"
    local.write_text(f"name: local\nworkdir: {tmp_path / 'code'}\nrun: python train.py\n")
    replaced = run("jobs", "launch", "-y", "-d", str(local), "--git-url", REPO, *cli_api)
    assert workdir_of(submitted_task(stack, replaced)) == (REPO, None)  # the file's local workdir gives way

    git = tmp_path / "git.yaml"
    git.write_text(f"name: git\nworkdir:\n  url: {REPO}\n  ref: main\nrun: python train.py\n")
    new_ref = run("launch", "-y", "-d", str(git), "--git-ref", "v2", *cli_api)
    assert workdir_of(submitted_task(stack, new_ref)) == (REPO, "v2")  # the file's url, the flag's ref
    other = "https://github.com/org/fork.git"
    new_url = run("launch", "-y", "-d", str(git), "--git-url", other, *cli_api)
    assert workdir_of(submitted_task(stack, new_url)) == (other, "main")  # the flag's url, the file's ref


def test_git_flags_sky_would_refuse_or_drop_are_refused_naming_the_flag(
    stack: Settings, cli_api: list[str], tmp_path: Path
) -> None:
    (tmp_path / "code").mkdir()
    both = run("launch", "-d", "--git-url", REPO, "--workdir", str(tmp_path / "code"), "echo", *cli_api)
    assert both.exit_code == 2 and "--git-url: cannot be given with --workdir" in both.output

    lone = run("launch", "-d", "--git-ref", "v1", "echo hi", *cli_api)  # sky drops it silently
    assert lone.exit_code == 2, lone.output
    assert "--git-ref: needs --git-url, or a git workdir in the task file" in lone.output
    assert nothing_submitted(stack, cli_api)


def test_config_is_the_top_layer_over_sky_config_with_the_same_notes(
    stack: Settings, cli_api: list[str], sky_home: Path, tmp_path: Path
) -> None:
    (sky_home / ".sky" / "config.yaml").write_text("allowed_clouds: [gcp]\n")

    result = run(
        "launch", "--dryrun", "--cpus", "2+", "echo hi", "--config", "allowed_clouds=[aws]",
        "--config", "jobs.controller.resources.cpus=4", *cli_api,
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    rows = [line.split("│")[1].strip() for line in result.output.splitlines() if line.count("│") > 8]
    assert rows and set(rows) == {"aws"}, result.output  # --config's aws, not the file's gcp
    where = f"{sky_home / '.sky' / 'config.yaml'} + --config"
    assert f"{where}: allowed_clouds: applied: only aws considered" in result.output
    assert f"{where}: jobs.controller: read, not applied: skyless has no controller VM" in result.output

    config = tmp_path / "override.yaml"
    config.write_text("allowed_clouds: [aws]\n")
    from_file = run("jobs", "launch", "-y", "-d", "echo hi", "--config", str(config), *cli_api)
    assert f"--config {config}: allowed_clouds: applied: only aws considered" in from_file.output
    job_id = from_file.output.split("Job ", 1)[1].split()[0]
    stored = wiring_for(stack).store.get(job_id)
    assert stored is not None and json.loads(stored.clouds) == ["aws"]  # what the job is planned on


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--config", "allowed_clouds"], "--config: expected key=value or a config file that exists"),
        (["--config", "=aws"], "--config: expected key=value"),
        (["--config", "allowed_clouds=[aws"], "--config: allowed_clouds: the value is not valid YAML"),
        (["--config", "allowed_clouds=[nimbus]"], "allowed_clouds"),
    ],
)
def test_a_bad_config_override_is_refused_naming_the_flag(
    stack: Settings, cli_api: list[str], sky_home: Path, flags: list[str], message: str
) -> None:
    result = run("launch", "-d", "echo hi", *flags, *cli_api)
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output and nothing_submitted(stack, cli_api)


def test_a_config_file_must_be_the_only_config(
    stack: Settings, cli_api: list[str], sky_home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "override.yaml"
    config.write_text("allowed_clouds: [aws]\n")
    result = run("launch", "-d", "echo hi", "--config", str(config), "--config", "a=1", *cli_api)
    assert result.exit_code == 2 and "--config: a config file must be the only --config" in result.output


def test_wait_for_takes_jobs_and_ssh_on_launch_and_start_and_refuses_the_others(
    stack: Settings, cli_api: list[str]
) -> None:
    for verb in (["launch", "-c", "dev", "-i", "5", "echo hi"], ["start", "dev"], ["autostop", "dev"]):
        for value, message in (
            ("jobs", "--wait-for: skyless counts a cluster idle only with no job and no open shell"),
            ("none", "none is not offered"),
            ("sometimes", "--wait-for: must be one of jobs_and_ssh, jobs, none, not sometimes"),
        ):
            result = run(*verb, "--wait-for", value, *cli_api)
            assert result.exit_code == 2 and message in result.output, (verb, value, result.output)
    assert nothing_submitted(stack, cli_api)

    without_cluster = run("launch", "-d", "--wait-for", "jobs_and_ssh", "echo hi", *cli_api)
    assert without_cluster.exit_code == 2
    assert "--wait-for need a cluster: add -c NAME" in without_cluster.output

    accepted = run("launch", "-d", "-c", "dev", "-i", "5", "--wait-for", "jobs_and_ssh", "echo hi", *cli_api)
    assert accepted.exit_code == 0, accepted.output
    (dev,) = ClusterStore(stack).clusters_of(cli_user_id(cli_api, stack))
    assert (dev.name, int(dev.autostop_minutes)) == ("dev", 5)


@pytest.mark.parametrize("flag", ["--clone-disk-from", "--clone"])
def test_clone_disk_from_is_refused_with_its_reason(stack: Settings, cli_api: list[str], flag: str) -> None:
    result = run("launch", "-y", "-c", "dev2", flag, "dev", "echo hi", *cli_api)
    assert result.exit_code == 2, result.output
    assert "--clone-disk-from: skyless keeps no disk images" in result.output
    assert "No such option" not in result.output and nothing_submitted(stack, cli_api)


def test_status_takes_one_of_ip_endpoint_and_endpoints(stack: Settings, cli_api: list[str]) -> None:
    for flags in (["--ip", "--endpoints"], ["--endpoint", "80", "--endpoints"], ["--ip", "--endpoint", "80"]):
        result = run("status", "web", *flags, *cli_api)
        assert result.exit_code == 2, (flags, result.output)
        assert "give one of --ip, --endpoint PORT and --endpoints (as in sky)" in result.output
