"""`skyless launch | queue | status | logs | cancel` through typer's CliRunner, against the API served on a
real local HTTP port over moto, and end to end against the local runtime started on demand."""

from __future__ import annotations

import io
import socket
import tarfile
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "200"}
TASK = "name: cli-demo\nresources:\n  cpus: 1+\nrun: echo hi\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def _task_file(tmp_path: Path, text: str = TASK, name: str = "task.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _launch_detached(tmp_path: Path, cli_api: list[str], text: str = TASK) -> str:
    result = _run("launch", _task_file(tmp_path, text), "--detach", *cli_api)
    assert result.exit_code == 0, result.output
    return result.output.split("Job ", 1)[1].split()[0]


def test_launch_detached_submits_and_prints_the_job_id(
    stack: Settings, tmp_path: Path, cli_api: list[str]
) -> None:
    job_id = _launch_detached(tmp_path, cli_api)

    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.name == "cli-demo"
    assert job.state == "PLANNED"  # planned at submit


def test_launch_passes_env_overrides_minimize_and_clouds(
    stack: Settings, tmp_path: Path, cli_api: list[str]
) -> None:
    text = "name: e\nenvs:\n  GREETING: null\nresources:\n  cpus: 1+\nrun: echo $GREETING\n"
    path = _task_file(tmp_path, text)
    result = _run(
        "launch", path, "--env", "GREETING=hello", "--clouds", "aws", "--minimize", "time", "-d", *cli_api
    )

    assert result.exit_code == 0, result.output
    job_id = result.output.split("Job ", 1)[1].split()[0]
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.minimize == "time" and job.clouds == '["aws"]'


def test_launch_uploads_a_local_workdir_and_the_job_points_at_it(
    stack: Settings, tmp_path: Path, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('training')\n")
    (code / ".git").mkdir()
    (code / ".git" / "HEAD").write_text("ref: main\n")
    monkeypatch.chdir(tmp_path)

    job_id = _launch_detached(tmp_path, cli_api, TASK + "workdir: code\n")

    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.workdir_key
    s3 = boto3.client("s3", region_name=stack.region, endpoint_url=stack.endpoint_url)
    payload = s3.get_object(Bucket=stack.bucket, Key=job.workdir_key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(payload)) as archive:
        names = archive.getnames()
    assert "./train.py" in names
    assert not any(".git" in name for name in names)


def test_launch_of_an_invalid_file_names_file_line_and_field_without_a_traceback(
    tmp_path: Path, cli_api: list[str]
) -> None:
    path = _task_file(tmp_path, "name: x\nresources:\n  cpus: lots\nrun: echo\n", "bad.yaml")

    result = _run("launch", path, *cli_api)

    assert result.exit_code == 2
    assert f"{path}:3" in result.output
    assert "cpus" in result.output
    assert "Traceback" not in result.output


def test_launch_of_a_missing_file_or_a_bad_env_is_a_clear_error(tmp_path: Path, cli_api: list[str]) -> None:
    missing = _run("launch", str(tmp_path / "nope.yaml"), *cli_api)
    bad_env = _run("launch", _task_file(tmp_path), "--env", "NOEQUALS", *cli_api)

    assert missing.exit_code == 2 and "no such task file" in missing.output and "nope.yaml" in missing.output
    assert bad_env.exit_code == 2 and "K=V" in bad_env.output


def test_queue_shows_the_users_jobs_in_a_table(tmp_path: Path, cli_api: list[str]) -> None:
    first, second = _launch_detached(tmp_path, cli_api), _launch_detached(tmp_path, cli_api)

    result = _run("queue", *cli_api)

    assert result.exit_code == 0, result.output
    assert "2 job(s)" in result.output
    assert first in result.output and second in result.output
    assert "PLANNED" in result.output


def test_status_shows_the_job_and_its_timeline(tmp_path: Path, cli_api: list[str]) -> None:
    job_id = _launch_detached(tmp_path, cli_api)

    result = _run("status", job_id, *cli_api)

    assert result.exit_code == 0, result.output
    assert job_id in result.output
    assert "timeline" in result.output
    assert "submitted" in result.output
    assert "cost so far: $0.0000" in result.output and "spot: no" in result.output  # the plan's choice
    assert "+00:00" not in result.output  # times read as local date and time, not raw ISO


def test_cancel_cancels_and_a_second_cancel_is_harmless(tmp_path: Path, cli_api: list[str]) -> None:
    job_id = _launch_detached(tmp_path, cli_api)

    first, second = _run("cancel", job_id, *cli_api), _run("cancel", job_id, *cli_api)

    assert first.exit_code == second.exit_code == 0
    assert "CANCELLED" in first.output
    assert "CANCELLED" in _run("status", job_id, *cli_api).output


def test_logs_prints_a_ranks_log_and_follow_ends_with_the_job(
    stack: Settings, tmp_path: Path, cli_api: list[str]
) -> None:
    job_id = _launch_detached(tmp_path, cli_api)
    objects = wiring_for(stack).objects
    objects.put_text(f"runs/{job_id}/logs/0/000-000001", "rank zero says hi\n")
    objects.put_text(f"runs/{job_id}/logs/1/000-000001", "rank one says hi\n")

    assert "rank zero says hi" in _run("logs", job_id, "--no-follow", *cli_api).output  # the job runs on
    assert "rank one says hi" in _run("logs", job_id, "--rank", "1", "--no-follow", *cli_api).output
    _run("cancel", job_id, *cli_api)
    followed = _run("logs", job_id, "--follow", *cli_api)
    assert followed.exit_code == 0
    assert followed.output.count("rank zero says hi") == 1


def test_an_unknown_job_is_a_clear_error(cli_api: list[str]) -> None:
    result = _run("status", "job-does-not-exist", *cli_api)

    assert result.exit_code == 2
    assert "no job job-does-not-exist" in result.output
    assert "Traceback" not in result.output


def test_a_wrong_api_key_is_a_clear_error(cli_api: list[str]) -> None:
    result = _run("queue", "--api-url", cli_api[1], "--api-key", "sky_wrong")

    assert result.exit_code == 2
    assert "credentials not recognised" in result.output


def test_an_api_that_does_not_answer_is_a_clear_error() -> None:
    result = _run("queue", "--api-url", f"http://127.0.0.1:{_free_port()}", "--api-key", "k")

    assert result.exit_code == 2
    assert "cannot reach the skyless API" in result.output
    assert "Traceback" not in result.output


def test_the_api_is_found_through_the_environment_and_the_config_file(
    tmp_path: Path, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, key = cli_api[1], cli_api[3]
    monkeypatch.setenv("SKYLESS_API_URL", url)
    monkeypatch.setenv("SKYLESS_API_KEY", key)
    assert _run("queue").exit_code == 0

    monkeypatch.delenv("SKYLESS_API_URL")
    monkeypatch.delenv("SKYLESS_API_KEY")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"api_url: {url}\napi_key: {key}\n")
    monkeypatch.setenv("SKYLESS_HOME", str(home))
    assert _run("queue").exit_code == 0
    (home / "config.yaml").write_text("api_url: [oops\n")
    broken = _run("queue")
    assert broken.exit_code == 2 and "config.yaml" in broken.output


def test_launch_with_nothing_configured_runs_the_job_on_the_local_runtime_to_the_end(
    tmp_path: Path, local_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "data.txt").write_text("shipped with the workdir\n")
    monkeypatch.chdir(tmp_path)
    ok_text = "name: ok\nworkdir: code\nresources:\n  cpus: 1+\nrun: echo the answer is 42; cat data.txt\n"
    ok = _task_file(tmp_path, ok_text, "ok.yaml")
    bad = _task_file(tmp_path, "name: bad\nresources:\n  cpus: 1+\nrun: echo failing; exit 3\n", "bad.yaml")

    succeeded = _run("launch", ok)
    failed = _run("launch", bad)

    assert succeeded.exit_code == 0, succeeded.output
    assert "Starting the local runtime" in succeeded.output  # a first start takes seconds: say so
    assert "Starting the local runtime" not in failed.output  # the second finds it running
    for expected in ("PLANNED", "SUCCEEDED", "the answer is 42", "shipped with the workdir"):
        assert expected in succeeded.output
    running = next(line for line in succeeded.output.splitlines() if "RUNNING" in line)
    assert "/" in running  # where it runs: cloud/region and the instance type
    assert failed.exit_code == 1, failed.output
    assert "FAILED" in failed.output and "failing" in failed.output
    assert (local_home / "local" / "runtime.json").exists()
