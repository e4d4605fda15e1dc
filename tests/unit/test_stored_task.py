"""The stored task read without the models (shared.task.stored) equals the models' reading of it, over every
example, every parser fixture and the corpus of SkyPilot's own task files: field by field, and in what the
steps after submit ask of it (requests, locations, images per cloud, bucket mounts, recovery options)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from shared.errors import UserError
from shared.jobs.recovery import recovery_options_of
from shared.jobs.task_records import pipeline_json
from shared.storage.specs import bucket_mounts
from shared.task.container_image import image_id_for
from shared.task.loader import load_pipeline, load_pipeline_file
from shared.task.spec import Pipeline
from shared.task.stored import read_stored_pipeline

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TASK_FILES = sorted(
    [
        *(ROOT / "examples").glob("*.yaml"),
        *(FIXTURES / "semantics").glob("*.yaml"),
        *(FIXTURES / "containers").glob("*.yaml"),
        *(FIXTURES / "skypilot" / "accepted").glob("*.yaml"),
        *(FIXTURES / "skypilot_corpus").glob("*.yaml"),
    ]
)
CLOUDS = (None, "aws", "gcp", "azure", "lambda", "runpod", "kubernetes", "local")


# Forms no file above writes: a location written both ways, the private fields SkyPilot writes itself.
EDGE_TASKS = [
    "resources:\n  infra: aws/us-east-1\n  any_of:\n    - cloud: gcp\n    - zone: us-east-1a\n    - {}\n",
    "resources:\n  cloud: aws\n  ordered:\n    - infra: gcp\n    - region: us-west-2\n",
    "resources:\n  gpus: {A100: null}\n  _requires_fuse: true\n  _is_image_managed: false\n"
    "  _no_missing_accel_warnings: true\n  _cluster_config_overrides: {a: 1}\n"
    "  _docker_login_config: {username: u, password: p, server: s}\n",
    "file_mounts:\n  /data:\n    name: my-bucket\n    store: s3\n    _is_sky_managed: true\n"
    "    _bucket_sub_path: a/b\n    _force_delete: false\n"
    "    config: {mount_cached: {transfers: 4, read_only: true}, mount: {read_only: false}}\n"
    "_metadata: {git_commit: abc}\n",
    "resources:\n  job_recovery: {strategy: failover, max_restarts_on_errors: 3,"
    " recover_on_exit_codes: [33, 34]}\n"
    "  ports: [8080, '9000-9010']\n  disk_size: 256GB\n  labels: {team: ml}\n",
    "name: a\nexecution: parallel\n---\nname: x\nrun: echo x\n---\nname: y\nrun: echo y\n",
]


def stored_form(path: Path | str) -> dict[str, Any] | None:
    """What submit would store for the file, its envs left empty given a value as `--env` would (None: a
    file the parser refuses, which is never stored)."""
    text = path.read_text(encoding="utf-8") if isinstance(path, Path) else path
    given = dict.fromkeys(_empty_envs(text), "given")
    try:
        if isinstance(path, Path):
            pipeline = load_pipeline_file(path, given, defer_secrets=True)
        else:
            pipeline = load_pipeline(path, env_overrides=given, defer_secrets=True)
    except UserError:
        return None
    data = pipeline_json(pipeline)
    for task in data["tasks"]:
        task.pop("secrets", None)  # kept apart from the job record (shared.jobs.task_records)
    loaded: dict[str, Any] = json.loads(json.dumps(data, separators=(",", ":")))
    return loaded


def _empty_envs(text: str) -> set[str]:
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return set()
    return {
        name
        for document in documents
        if isinstance(document, dict) and isinstance(document.get("envs"), dict)
        for name, value in document["envs"].items()
        if value is None
    }


STORED = [(path, form) for path in TASK_FILES if (form := stored_form(path)) is not None]


def assert_same(reader: Any, model: Any, where: str) -> None:
    fields_set = getattr(reader, "model_fields_set", None)  # every record has one
    if dataclasses.is_dataclass(reader) and not isinstance(reader, type):
        assert fields_set == model.model_fields_set, where
        for spec in dataclasses.fields(reader):
            if spec.init:
                assert_same(getattr(reader, spec.name), getattr(model, spec.name), f"{where}.{spec.name}")
    elif isinstance(model, BaseModel):  # a section kept as its stored JSON
        assert reader == model.model_dump(mode="json", by_alias=True, exclude_none=True), where
    elif isinstance(reader, list):
        assert isinstance(model, list) and len(reader) == len(model), where
        for i, (r, m) in enumerate(zip(reader, model, strict=True)):
            assert_same(r, m, f"{where}[{i}]")
    elif isinstance(reader, dict):
        assert isinstance(model, dict) and list(reader) == list(model), where
        for key in reader:
            assert_same(reader[key], model[key], f"{where}.{key}")
    else:
        assert (type(reader), reader) == (type(model), model), where


def what_steps_ask(pipeline: Any) -> list[Any]:
    """Every answer the optimize, provision, spot_watch and reconcile steps take from a stored task."""
    asked: list[Any] = [pipeline.execution, pipeline.deferred_secrets]
    for task in pipeline.tasks:
        choice = task.resource_choice()
        asked += [choice, [r.source for r in choice.requests], task.inputs_gb, task.outputs_gb]
        asked.append(task.num_nodes)
        resources = task.resources
        asked += [(fields.location(), fields.disk_size_gib(), fields.port_ranges()) for fields in
                  [resources, *resources.alternatives()]]  # fmt: skip
        asked += [repr(image_id_for(resources, cloud)) for cloud in CLOUDS]
        try:
            asked.append(bucket_mounts(task))
        except UserError as error:
            asked.append(str(error))
        asked.append(recovery_options_of(task))
    return asked


def test_the_files_cover_every_kind_of_task() -> None:
    stored = [form for _, form in STORED]
    tasks = [t for s in stored for t in s["tasks"]]
    assert len(stored) >= 150
    for section in ("file_mounts", "inputs", "outputs", "service", "config", "workdir", "envs"):
        assert any(section in t for t in tasks), section
    for key in ("any_of", "ordered", "job_recovery", "image_id", "ports", "disk_size", "infra", "labels"):
        assert any(key in t.get("resources", {}) for t in tasks), key
    assert any(isinstance(m, dict) for t in tasks for m in (t.get("file_mounts") or {}).values())
    assert any(s["execution"] == "parallel" for s in stored) and any(len(s["tasks"]) > 1 for s in stored)


@pytest.mark.parametrize(
    "path",
    [*(path for path, _ in STORED), *EDGE_TASKS],
    ids=lambda p: f"{p.parent.name}/{p.name}" if isinstance(p, Path) else p[:40],
)
def test_the_reader_reads_a_stored_task_as_the_models_do(path: Path | str) -> None:
    stored = stored_form(path)
    assert stored is not None, "a form the parser refuses is never stored"
    model = Pipeline.model_validate(stored)
    reader = read_stored_pipeline(stored)

    assert_same(reader, model, "pipeline")
    assert what_steps_ask(reader) == what_steps_ask(model)


def test_an_alternative_that_writes_image_id_null_keeps_it_null_on_its_cloud() -> None:
    """`image_id: null` under one alternative (SkyPilot's gpt2 example for Lambda) overrides the task's."""
    stored = {
        "tasks": [
            {
                "resources": {
                    "image_id": "docker:base",
                    "any_of": [{"cloud": "lambda", "image_id": None}, {"cloud": "aws"}],
                }
            }
        ]
    }
    (task,) = read_stored_pipeline(stored).tasks

    assert image_id_for(task.resources, "lambda") is None
    assert image_id_for(task.resources, "aws") == "docker:base"
    assert [a.image_id for a in task.resources.alternatives()] == ["docker:base", "docker:base"]
