"""Where a job's validated pipeline lives: in the job record when small, in the bucket when not.
A task's `secrets` never go in a table: they are kept in the bucket beside the run."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from shared.errors import StoredTaskRefused
from shared.store.models import JobModel
from shared.task.docker_run_options import RUN_OPTIONS_FIELD, run_option_words, run_options_value
from shared.wiring import Wiring

if TYPE_CHECKING:
    from shared.task.stored import StoredPipeline

MAX_INLINE_TASK_BYTES = 8 * 1024


def pipeline_json(pipeline: Any) -> dict[str, Any]:
    data = pipeline.model_dump(mode="json", by_alias=True, exclude_none=True)
    for task, written in zip(pipeline.tasks, data["tasks"], strict=True):
        for key in ("any_of", "ordered"):
            alternatives = zip(
                getattr(task.resources, key) or (), written["resources"].get(key) or (), strict=True
            )
            for alternative, dumped in alternatives:
                if alternative.image_id is None and "image_id" in alternative.model_fields_set:
                    dumped["image_id"] = None  # `image_id: null` overrides the task's image there (SkyPilot)
    return data


def store_pipeline(wiring: Wiring, job: JobModel, pipeline: Any) -> None:
    """Set `job.task` or `job.task_key`; secrets go to runs/<job>/secrets.json."""
    data = pipeline_json(pipeline)
    secrets = {str(i): task.pop("secrets") for i, task in enumerate(data["tasks"]) if task.get("secrets")}
    if secrets:
        wiring.objects.put_text(f"runs/{job.job_id}/secrets.json", json.dumps(secrets))
    text = json.dumps(data, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_INLINE_TASK_BYTES:
        key = f"runs/{job.job_id}/task.json"
        wiring.objects.put_text(key, text)
        job.task_key = key
    else:
        job.task = text


def load_pipeline_of(wiring: Wiring, job: JobModel) -> Any:
    """The job's pipeline as the models (shared.task.spec): what the node's config is built from."""
    from shared.task.spec import Pipeline

    data = _stored_pipeline(wiring, job)
    problem = stored_task_problem(data)
    if problem is not None:
        raise StoredTaskRefused(problem, field=RUN_OPTIONS_FIELD)
    return Pipeline.model_validate(data)


def refused_stored_task(wiring: Wiring, job: JobModel) -> str | None:
    """`stored_task_problem` of the job's stored pipeline."""
    return stored_task_problem(_stored_pipeline(wiring, job))


def stored_task_problem(data: dict[str, Any]) -> str | None:
    """Why a stored pipeline cannot run, naming the field; None when nothing in it is refused now. Jobs
    stored before `config.docker.run_options` was applied kept it unchecked: an option refused since
    (shared/task/docker_run_options.py) ends such a job."""
    tasks = data.get("tasks") or []
    for index, task in enumerate(tasks):
        try:
            run_option_words(run_options_value(task.get("config")) or [])
        except ValueError as error:
            which = f" (task {index + 1})" if len(tasks) > 1 else ""
            return (
                f"{RUN_OPTIONS_FIELD}{which}: {error} (the job was stored before these options were "
                "applied and checked; submit it again without it)"
            )
    return None


def read_pipeline_of(wiring: Wiring, job: JobModel) -> StoredPipeline:
    """The job's pipeline as plain records (shared.task.stored), without building the models: what
    optimize, provision and recovery read (imported on use: spot_watch and reconcile rarely need it)."""
    from shared.task.stored import read_stored_pipeline

    return read_stored_pipeline(_stored_pipeline(wiring, job))


def _stored_pipeline(wiring: Wiring, job: JobModel) -> dict[str, Any]:
    text = job.task or (wiring.objects.get_text(job.task_key) if job.task_key else None)
    if text is None:
        raise LookupError(f"job {job.job_id} has no task")
    data: dict[str, Any] = json.loads(text)
    return data


def secrets_of(wiring: Wiring, job: JobModel, task_index: int) -> dict[str, str]:
    text = wiring.objects.get_text(f"runs/{job.job_id}/secrets.json")
    return dict(json.loads(text).get(str(task_index), {})) if text else {}
