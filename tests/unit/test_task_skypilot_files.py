"""Real SkyPilot task files (tests/fixtures/skypilot): the accepted ones load, the rejected ones fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.errors import TaskFileError
from shared.task.loader import load_pipeline_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "skypilot"
ACCEPTED = sorted((FIXTURES / "accepted").glob("*.yaml"))
# Files whose null envs/secrets SkyPilot also refuses (at launch) until they are given on the command line.
NEEDS_VALUES = {
    "gpt2_pipeline.yaml": ({"BUCKET_NAME": "my-bucket"}, {}, "envs.BUCKET_NAME"),
    "multi_accelerator.yaml": ({"HF_TOKEN": "hf_x"}, {}, "envs.HF_TOKEN"),
    "vllm_service.yaml": ({}, {"HF_TOKEN": "hf_x"}, "secrets.HF_TOKEN"),
}
REJECTED = {
    "bert_qa_spot_recovery.yaml": (
        7,
        "resources.spot_recovery",
        "Instead of 'spot_recovery', did you mean 'job_recovery'?",
    ),
}


def test_there_are_about_25_real_files() -> None:
    assert len(ACCEPTED) + len(REJECTED) >= 25


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.name)
def test_file_skypilot_accepts_loads(path: Path) -> None:
    envs, secrets, _ = NEEDS_VALUES.get(path.name, ({}, {}, ""))
    pipeline = load_pipeline_file(path, env_overrides=envs, secret_overrides=secrets)
    assert pipeline.tasks
    for task in pipeline.tasks:
        assert task.resource_choice().requests


@pytest.mark.parametrize("name", sorted(NEEDS_VALUES))
def test_file_with_null_values_is_rejected_without_them(name: str) -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FIXTURES / "accepted" / name)
    assert caught.value.field == NEEDS_VALUES[name][2]
    assert "is None" in caught.value.message


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_file_skypilot_rejects_is_rejected_for_the_same_reason(name: str) -> None:
    line, field, reason = REJECTED[name]
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FIXTURES / "rejected" / name)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert reason in str(caught.value)


def test_job_group_fixtures_keep_their_header_settings() -> None:
    pipeline = load_pipeline_file(FIXTURES / "accepted" / "smoke_primary_auxiliary.yaml")
    assert (pipeline.execution, pipeline.primary_tasks, pipeline.termination_delay) == (
        "parallel",
        ["trainer"],
        "10s",
    )
    assert (
        load_pipeline_file(FIXTURES / "accepted" / "smoke_inter_connection_false.yaml").inter_connection
        is False
    )


def test_chain_without_header_from_skypilot_is_two_tasks() -> None:
    pipeline = load_pipeline_file(FIXTURES / "accepted" / "test_managed_jobs_retry.yaml")
    assert pipeline.execution == "serial" and len(pipeline.tasks) == 2
    assert pipeline.tasks[0].resources.job_recovery.max_restarts_on_errors == 1  # type: ignore[union-attr]


def test_unnamed_bucket_plans_like_skypilots_dry_run_and_is_refused_at_launch() -> None:
    from shared.errors import UserError
    from shared.jobs.file_mounts import mount_sources
    from shared.storage.access import StorageWalls

    path = FIXTURES / "accepted" / "torchelastic_unnamed_bucket.yaml"
    (task,) = load_pipeline_file(path).tasks
    with pytest.raises(UserError) as caught:
        mount_sources(task, walls=StorageWalls("skyless-artifacts"), filename=str(path))
    assert caught.value.field == "file_mounts./checkpoint"
    assert "names no bucket" in caught.value.message


def test_null_secrets_are_deferred_when_planning_and_named_for_launch() -> None:
    pipeline = load_pipeline_file(FIXTURES / "accepted" / "vllm_service.yaml", defer_secrets=True)
    assert pipeline.deferred_secrets == {0: ["HF_TOKEN"]}
    assert "HF_TOKEN" not in pipeline.tasks[0].secrets
