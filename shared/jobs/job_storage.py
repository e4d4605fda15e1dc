"""The jobs side of bucket mounts (shared.storage): what provision, teardown and the agent config call."""

from __future__ import annotations

from typing import Any

from shared.clouds.errors import InvalidLaunchError, TransientCloudError
from shared.errors import ForbiddenError, NotFoundError, StoredTaskRefused
from shared.jobs.recovery import fail_job
from shared.jobs.task_records import load_pipeline_of, read_pipeline_of
from shared.states import JobState, is_terminal
from shared.storage.lifecycle import (
    StorageBusy,
    StorageFailure,
    job_bucket_mounts,
    node_storage,
    prepare_job_storage,
    release_job_storage,
)
from shared.storage.rclone import rclone_commands
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring, wiring_for


def prepare_storage(wiring: Wiring, job: JobModel, cloud: str) -> None:
    """Before a launch: the job's buckets exist (created when missing). InvalidLaunchError fails the job;
    TransientCloudError (a bucket still being deleted by its last user) retries the launch later."""
    task = read_pipeline_of(wiring, job).tasks[int(job.task_index)]
    if not job_bucket_mounts(wiring.settings, task):
        return
    try:
        notes = prepare_job_storage(wiring.settings, job, task, cloud)
    except StorageBusy as error:
        raise TransientCloudError(error.message) from None
    except StorageFailure as error:
        raise InvalidLaunchError(error.message) from None
    for note in notes:
        wiring.store.note(job.job_id, "storage", note)


def release_storage(wiring: Wiring, job: JobModel) -> None:
    """At job end: the buckets this job created and did not ask to keep are deleted."""
    tasks = read_pipeline_of(wiring, job).tasks
    if not any(job_bucket_mounts(wiring.settings, task) for task in tasks):
        return
    for note in release_job_storage(wiring.settings, job, tasks):
        wiring.store.note(job.job_id, "storage", note)


def storage_for_node(wiring: Wiring, job: JobModel, task: Any, cluster: ClusterModel) -> list[dict[str, Any]]:
    """Each bucket mount with credentials for it alone; on a real VM also the rclone commands that mount it,
    or copy it from GCS and Azure (the local cloud copies and writes back S3 itself: no FUSE there)."""
    if not job_bucket_mounts(wiring.settings, task):
        return []
    session = f"skyless-{job.job_id}-{int(job.attempt)}"
    try:
        entries = node_storage(wiring.settings, job, task, cluster.cloud, session=session)
    except StorageFailure as error:  # a grant revoked (or a bucket gone) since the job was accepted
        raise ForbiddenError(error.message, field="storage") from None
    if cluster.provider != "local":
        for index, entry in enumerate(entries):
            if entry["mode"] != "COPY" or entry["api"] != "s3":  # the agent copies from S3 on its own
                entry["rclone"] = rclone_commands(entry, index, mount_options(task, entry["path"]))
    return entries


def mount_options(task: Any, path: str) -> dict[str, Any]:
    """A storage object's `config.mount_cached` settings (rclone's VFS cache knobs), if any."""
    spec = (task.file_mounts or {}).get(path)
    config = getattr(spec, "config", None)
    cached = getattr(config, "mount_cached", None)
    return cached.model_dump(exclude_none=True) if cached is not None else {}


def fresh_node_storage(settings: Any, job_id: str, instance_id: str) -> list[dict[str, Any]]:
    """New credentials for a node of the job's current cluster (its old ones are about to expire);
    NotFoundError for any other node."""
    wiring = wiring_for(settings)
    job = wiring.store.get(job_id)
    cluster = wiring.store.cluster(job.cluster_id) if job is not None else None
    if job is None or cluster is None or instance_id not in (cluster.nodes or {}):
        raise NotFoundError(f"{instance_id} is not a node of job {job_id} now", field="instance_id")
    try:
        task = load_pipeline_of(wiring, job).tasks[int(job.task_index)]
    except StoredTaskRefused as refused:
        if not is_terminal(JobState(job.state)):  # asked again once failed: failed once
            fail_job(wiring, job, refused.message)
        raise
    return storage_for_node(wiring, job, task, cluster)
