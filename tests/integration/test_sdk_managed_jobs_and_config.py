"""The SDK's managed jobs (`skyless.jobs`) and `skyless launch` with SkyPilot's config file, against the API
served on a real local HTTP port over moto: what reaches the job record, and two users who cannot reach each
other's jobs through the SDK."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

import skyless
from cli.main import app as cli
from shared.config import Settings
from shared.jobs.task_records import load_pipeline_of
from shared.wiring import wiring_for


@pytest.fixture
def sky_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".sky").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SKYPILOT_CONFIG", raising=False)
    return home


@pytest.fixture
def sdk(cli_api: list[str]) -> Iterator[str]:
    """The SDK pointed at the test API as the first user; answers that user's key."""
    skyless.api_login(cli_api[1], cli_api[3])
    yield cli_api[3]
    skyless.api_login(None, None)


def test_cli_launch_applies_allowed_clouds_and_labels_and_says_what_it_ignores(
    stack: Settings, tmp_path: Path, cli_api: list[str], sky_home: Path
) -> None:
    (sky_home / ".sky" / "config.yaml").write_text(
        "allowed_clouds: [azure]\nazure:\n  labels: {team: ml, owner: config}\n  resource_group_vm: rg\n"
        "docker:\n  run_options: [--shm-size=1g]\n"
    )
    task = tmp_path / "task.yaml"
    task.write_text("name: cfg\nresources:\n  cpus: 1+\n  labels: {owner: task}\nrun: echo hi\n")

    result = CliRunner().invoke(cli, ["launch", str(task), "-d", *cli_api], env={"COLUMNS": "300"})

    assert result.exit_code == 0, result.output
    assert "allowed_clouds: applied: only azure considered" in result.output
    assert "azure.labels: applied to cfg" in result.output
    assert "azure.resource_group_vm: read, not applied" in result.output
    assert "docker.run_options: read, not applied to cfg: it runs on its machine's own OS" in result.output
    job_id = result.output.split("Job ", 1)[1].split()[0]
    wiring = wiring_for(stack)
    job = wiring.store.get(job_id)
    assert job is not None and job.clouds == '["azure"]'
    (planned,) = load_pipeline_of(wiring, job).tasks
    assert planned.resources.labels == {"team": "ml", "owner": "task"}


def test_sdk_managed_job_uploads_its_workdir_and_is_listed_and_cancelled(
    stack: Settings, tmp_path: Path, sdk: str, sky_home: Path
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('training')\n")
    task = skyless.Task(name="nb-job", run="python train.py", workdir=code)
    task.set_resources(skyless.Resources(cpus="1+"))

    job_id, handle = skyless.jobs.launch(task)

    assert handle is None and job_id.startswith("job-")
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.state == "PLANNED" and job.workdir_key
    s3 = boto3.client("s3", region_name=stack.region, endpoint_url=stack.endpoint_url)
    payload = s3.get_object(Bucket=stack.bucket, Key=job.workdir_key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(payload)) as archive:
        assert "./train.py" in archive.getnames()
    listed = skyless.jobs.queue()
    assert [(j.job_id, j.name, type(j).__name__) for j in listed] == [(job_id, "nb-job", "ManagedJob")]
    assert skyless.jobs.cancel(name="nb-job") == [job_id]
    assert [j.status for j in skyless.jobs.queue()] == ["CANCELLED"]
    assert skyless.jobs.queue(skip_finished=True) == []
    assert skyless.jobs.tail_logs(job_id=job_id, follow=False, output_stream=io.StringIO()) == 103
    assert skyless.jobs.tail_logs("nb-job", follow=False, output_stream=io.StringIO()) == 103
    assert skyless.jobs.tail_logs("no-such-job", follow=False) == 102


def test_sdk_refuses_what_it_cannot_do_naming_the_argument(sdk: str, sky_home: Path) -> None:
    task = skyless.Task(run="echo hi")
    for kwargs, field in (({"dryrun": True}, "dryrun"), ({"retry_until_up": True}, "retry_until_up"),
                          ({"optimize_target": "speed"}, "optimize_target")):  # fmt: skip
        with pytest.raises(skyless.UserError) as caught:
            skyless.launch(task, cluster_name="dev", **kwargs)
        assert caught.value.field == field
    with pytest.raises(skyless.UserError) as missing:
        skyless.launch(skyless.Task(run="echo", secrets={"HF_TOKEN": None}), cluster_name="dev")
    assert missing.value.field is not None and "HF_TOKEN" in str(missing.value)
    with pytest.raises(skyless.ApiError) as unknown:
        skyless.queue("no-such-cluster")
    assert unknown.value.status_code == 404


def test_two_users_sdk_calls_never_reach_each_others_jobs(stack: Settings, cli_api: list[str]) -> None:
    from shared.store.users import create_user

    other_key = create_user("someone-else", stack)
    skyless.api_login(cli_api[1], cli_api[3])
    try:
        mine, _ = skyless.jobs.launch(skyless.Task(name="mine", run="echo a"))
        skyless.api_login(cli_api[1], other_key)
        theirs, _ = skyless.jobs.launch(skyless.Task(name="theirs", run="echo b"))
        assert [j.job_id for j in skyless.jobs.queue()] == [theirs]
        with pytest.raises(skyless.UserError):
            skyless.jobs.cancel(job_ids=[mine])
        assert skyless.jobs.cancel(all=True) == [theirs]
        skyless.api_login(cli_api[1], cli_api[3])
        assert [(j.job_id, j.status) for j in skyless.jobs.queue()] == [(mine, "PLANNED")]
    finally:
        skyless.api_login(None, None)


def test_a_cluster_launched_without_a_name_is_named_as_skypilot_names_it_and_is_its_owners_alone(
    stack: Settings, cli_api: list[str], sky_home: Path
) -> None:
    import re

    from shared.store.users import create_user

    other_key = create_user("neighbour", stack)
    skyless.api_login(cli_api[1], cli_api[3])
    try:
        job_id, handle = skyless.launch(skyless.Task(run="echo hi"))
        assert job_id == 1 and re.fullmatch(r"sky-[0-9a-f]{4}-[a-z0-9-]+", handle.cluster_name), handle
        assert handle.action == "created" and handle.status.status == "INIT"
        assert [c.name for c in skyless.status()] == [handle.cluster_name]
        skyless.api_login(cli_api[1], other_key)
        assert skyless.status() == []
        for call in (lambda: skyless.queue(handle.cluster_name), lambda: skyless.down(handle.cluster_name),
                     lambda: skyless.exec("cat ~/.ssh/id_rsa", handle.cluster_name),
                     lambda: skyless.cancel(handle.cluster_name, all=True)):  # fmt: skip
            with pytest.raises(skyless.ApiError) as refused:
                call()
            assert refused.value.status_code == 404
        skyless.api_login(cli_api[1], cli_api[3])
        assert [(c.name, c.status) for c in skyless.status()] == [(handle.cluster_name, "INIT")]
        assert [j.status for j in skyless.queue(handle.cluster_name)] == ["PENDING"]
    finally:
        skyless.api_login(None, None)


def test_a_schedule_created_from_the_cli_follows_the_config_as_launch_does(
    stack: Settings, tmp_path: Path, cli_api: list[str], sky_home: Path
) -> None:
    import json

    from shared.schedules.operations import get_schedule
    from shared.store.users import find_user

    (sky_home / ".sky" / "config.yaml").write_text("allowed_clouds: [gcp]\nprovision: {ssh_timeout: 10}\n")
    task = tmp_path / "nightly.yaml"
    task.write_text("name: nightly\nresources:\n  cpus: 1+\nrun: echo hi\n")
    created = CliRunner().invoke(
        cli,
        ["schedule", "create", "nightly", str(task), "--cron", "0 3 * * *", *cli_api],
        env={"COLUMNS": "300"},
    )
    assert created.exit_code == 0, created.output
    assert "allowed_clouds: applied: only gcp considered" in created.output
    assert "provision: read, not applied" in created.output
    user = find_user(cli_api[3], stack)
    assert user is not None
    assert json.loads(get_schedule(stack, owner=user.user_id, name="nightly").clouds) == ["gcp"]
