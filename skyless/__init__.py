"""skyless's Python SDK: SkyPilot's `sky.*` calls, on skyless's serverless control plane.

    import skyless

    task = skyless.Task(name="hello", run="echo hello from $SKYPILOT_NODE_RANK", workdir=".")
    task.set_resources(skyless.Resources(cpus="2+"))
    job_id, handle = skyless.launch(task, cluster_name="dev")    # provisions dev, queues the task
    skyless.tail_logs("dev", job_id)                               # its log, until it ends
    skyless.queue("dev"); skyless.status(); skyless.down("dev")

    skyless.jobs.launch(skyless.Task.from_yaml("train.yaml"))     # a managed job, recovered from preemptions

Calls go to the API the `skyless` command uses (SKYLESS_API_URL, ~/.skyless/config.yaml, or the local
runtime, started on first use); `api_login(url, key)` points them elsewhere. Importing this package is
cheap: each call's code is imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.errors import TaskFileError, UserError
from shared.lazy_faces import lazy_face
from skyless.clouds import AWS, GCP, Azure, Cloud, Lambda, RunPod
from skyless.task import Resources, Task

if TYPE_CHECKING:
    from cli.api_client import ApiError, ApiUnreachableError
    from skyless import jobs
    from skyless.cluster_calls import (
        autostop,
        cancel,
        cost_report,
        down,
        exec,
        get,
        launch,
        queue,
        start,
        status,
        stop,
        stream_and_get,
        tail_logs,
    )
    from skyless.connection import api_login
    from skyless.results import (
        ClusterHandle,
        ClusterStatus,
        CostEntry,
        JobRecord,
        LaunchResult,
        ManagedJob,
        ManagedJobLaunch,
    )

__all__ = [
    "AWS",
    "GCP",
    "ApiError",
    "ApiUnreachableError",
    "Azure",
    "Cloud",
    "ClusterHandle",
    "ClusterStatus",
    "CostEntry",
    "JobRecord",
    "Lambda",
    "LaunchResult",
    "ManagedJob",
    "ManagedJobLaunch",
    "Resources",
    "RunPod",
    "Task",
    "TaskFileError",
    "UserError",
    "api_login",
    "autostop",
    "cancel",
    "cost_report",
    "down",
    "exec",
    "get",
    "jobs",
    "launch",
    "queue",
    "start",
    "status",
    "stop",
    "stream_and_get",
    "tail_logs",
]

_CALLS = ("autostop", "cancel", "cost_report", "down", "exec", "get", "launch", "queue", "start", "status",
          "stop", "stream_and_get", "tail_logs")  # fmt: skip
_RESULTS = ("ClusterHandle", "ClusterStatus", "CostEntry", "JobRecord", "LaunchResult", "ManagedJob",
            "ManagedJobLaunch")  # fmt: skip
_face = lazy_face(
    __name__,
    {
        **dict.fromkeys(_CALLS, "skyless.cluster_calls"),
        **dict.fromkeys(_RESULTS, "skyless.results"),
        "api_login": "skyless.connection",
        "ApiError": "cli.api_client",
        "ApiUnreachableError": "cli.api_client",
    },
)


def __getattr__(name: str) -> object:
    if name == "jobs":
        import importlib

        return importlib.import_module("skyless.jobs")
    return _face(name)
