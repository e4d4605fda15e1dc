"""Task files read the way SkyPilot reads them: field names it accepts, what it checks only at launch,
secrets it needs only at launch, and every field skyless reads without acting on it said plainly."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.errors import TaskFileError, UserError
from shared.jobs.file_mounts import mount_sources
from shared.storage.access import StorageWalls
from shared.task.loader import load_pipeline_file

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"


def test_gpus_is_another_name_for_accelerators_also_inside_any_of() -> None:
    (task,) = load_pipeline_file(FILES / "gpus_field.yaml").tasks
    requests = task.resource_choice().requests
    assert {(r.cloud, r.accelerator, r.accelerator_count) for r in requests} == {
        ("aws", "A100", 8.0),
        ("gcp", "H100", 8.0),
    }
    assert [r.source for r in requests] == [("resources", "any_of", 0), ("resources", "any_of", 1)]


def test_gpus_and_accelerators_together_is_an_error_at_the_gpus_line() -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FILES / "gpus_and_accelerators.yaml")
    assert (caught.value.line, caught.value.field) == (4, "resources.gpus")
    assert "both set" in caught.value.message


def test_a_bad_gpus_value_is_reported_under_the_name_the_file_used() -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FILES / "gpus_bad_value.yaml")
    assert (caught.value.line, caught.value.field) == (4, "resources.gpus")


def test_null_secrets_fail_a_launch_load_but_are_deferred_for_a_plan() -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FILES / "null_secret.yaml")
    assert (caught.value.line, caught.value.field) == (3, "secrets.HF_TOKEN")
    pipeline = load_pipeline_file(FILES / "null_secret.yaml", defer_secrets=True)
    assert pipeline.deferred_secrets == {0: ["HF_TOKEN", "WANDB_API_KEY"]}
    given = load_pipeline_file(
        FILES / "null_secret.yaml", secret_overrides={"HF_TOKEN": "x"}, defer_secrets=True
    )
    assert given.deferred_secrets == {0: ["WANDB_API_KEY"]} and given.tasks[0].secrets == {"HF_TOKEN": "x"}


def test_a_storage_object_naming_no_bucket_plans_and_is_refused_at_launch() -> None:
    (task,) = load_pipeline_file(FILES / "unnamed_bucket.yaml").tasks
    with pytest.raises(UserError) as caught:
        mount_sources(task, walls=StorageWalls("skyless-artifacts"), filename="unnamed_bucket.yaml")
    assert (caught.value.file, caught.value.field) == ("unnamed_bucket.yaml", "file_mounts./checkpoint")


def test_every_field_read_but_not_acted_on_gets_one_plain_note() -> None:
    (task,) = load_pipeline_file(FILES / "every_ignored_field.yaml").tasks
    fields = [note.split(":", 1)[0] for note in task.unsupported]
    assert fields == [
        "event_callback",
        "config",
        "volumes",
        "managed_secrets",
        "api_server_access",
        "job",
        "resources.autostop",
        "resources.disk_tier",
        "resources.network_tier",
        "resources.volumes",
        "resources.local_disk",
        "resources.priority",
    ]
    assert all(", " in note and "read" in note for note in task.unsupported)
    assert "config: read, not applied: SkyPilot's per-task config (nvidia_gpus)" in task.unsupported[1]


def test_fields_of_skypilots_current_schema_are_accepted_and_said_unsupported() -> None:
    (task,) = load_pipeline_file(FILES / "newer_schema_fields.yaml").tasks
    secrets = task.managed_secrets
    assert isinstance(secrets, list) and secrets[0] == "hf-token"
    assert isinstance(secrets[1], dict) and secrets[1]["gcp-key"].mount_path == "/secrets/gcp.json"
    mount = task.file_mounts["/models"]  # type: ignore[index]
    assert not isinstance(mount, str) and mount.mount_options == "--read-only"
    assert task.config is not None and task.config.model_dump(exclude_none=True)["aws"] == {
        "labels": {"team": "ml"}
    }
    fields = [note.split(":", 1)[0] for note in task.unsupported]
    assert {"config", "volumes", "managed_secrets"} <= set(fields)
    assert (
        "config: read, not applied: SkyPilot's per-task config (aws)"
        in task.unsupported[fields.index("config")]
    )
