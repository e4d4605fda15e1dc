"""Managed jobs, as `sky.jobs.launch`, `sky.jobs.queue`, `sky.jobs.cancel` and `sky.jobs.tail_logs` name
them: a task run on its own nodes, recovered from preemptions, the nodes torn down when it ends."""

from __future__ import annotations

import sys
import time
from typing import IO

from shared.errors import UserError
from skyless.connection import connected, say_notes, submission
from skyless.results import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_NOT_FINISHED,
    EXIT_NOT_FOUND,
    ManagedJob,
    ManagedJobLaunch,
)
from skyless.task import Task

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def launch(
    task: Task,
    name: str | None = None,
    *,
    optimize_target: str = "cost",
    clouds: list[str] | None = None,
    max_cost: float | None = None,
    max_cost_action: str = "stop",
) -> ManagedJobLaunch:
    """Submit `task` as a managed job (`name` replaces the task's name); answers once it is planned.
    `max_cost` (USD, a skyless extra): notices at 50/80/100 %, then the job stops (or, `warn`, goes on)."""
    if name is not None:
        task = Task.from_yaml_config({**task.to_yaml_config(), "name": name})
    minimize = str(getattr(optimize_target, "name", optimize_target)).lower()
    if minimize not in ("cost", "time"):
        raise UserError(f"must be cost or time, not {optimize_target!r}", field="optimize_target")
    with connected() as client:
        sent = submission(client, task, clouds)
        say_notes([*sent.task_notes, *sent.config_notes])
        job = client.submit_job(sent.text, filename=sent.filename, minimize=minimize, clouds=sent.clouds,
                                workdir_key=sent.workdir_key, file_mount_keys=sent.mount_keys,
                                max_cost=max_cost, max_cost_action=max_cost_action)  # fmt: skip
    return ManagedJobLaunch(job.job_id, None)


def queue(refresh: bool = False, skip_finished: bool = False) -> list[ManagedJob]:
    """Your managed jobs, newest first. `refresh` changes nothing: the records are kept current."""
    del refresh
    with connected() as client:
        jobs = [ManagedJob.of(job) for job in client.list_jobs()]
    return [job for job in jobs if not (skip_finished and job.status in TERMINAL)]


def cancel(name: str | None = None, job_ids: list[int | str] | None = None, all: bool = False) -> list[str]:
    """Cancel managed jobs by id (`job-…` or SkyPilot's number, `job_ids=[3]`), by name, or every one not
    ended; answers the ids cancelled (`job-…`)."""
    if not (name or job_ids or all):
        raise UserError("name the jobs to cancel (job_ids or name), or all=True", field="job_ids")
    cancelled = []
    with connected() as client:
        targets = [str(job_id) for job_id in job_ids or []]
        if name or all:
            targets += [j.job_id for j in client.list_jobs()
                        if j.state not in TERMINAL and (all or j.name == name)]  # fmt: skip
        for job_id in targets:
            cancelled.append(client.cancel_job(job_id).job_id)
    return cancelled


def tail_logs(
    name: str | None = None,
    job_id: int | str | None = None,
    follow: bool = True,
    output_stream: IO[str] | None = None,
    *,
    poll_seconds: float = 1.0,
) -> int:
    """Write the job's log (by id, `job-…` or its number, or the newest job of that `name`; every node's,
    prefixed by rank on several) until it ends if `follow`; answers 0 succeeded, 100 failed, 101 not
    finished (without follow), 102 no such job, 103 cancelled."""
    from cli.log_streams import LogStreams

    if (name is None) == (job_id is None):
        raise UserError("give a job's name or its job_id, not both", field="job_id")
    out = output_stream or sys.stdout
    with connected() as client:
        if job_id is None:
            named = client.list_jobs(name=name)
            job_id = next((j.job_id for j in named if j.name == name), None)
            if job_id is None:
                return EXIT_NOT_FOUND
        target = str(job_id)
        if not target.startswith("job-"):
            target = client.get_job(target).job_id  # a number: the id it names
        streams = LogStreams(client, target)
        while True:
            job = client.get_job(target)
            text = streams.read(job)
            out.write(text)
            if (job.state in TERMINAL and (streams.finished or not text)) or (not follow and not text):
                out.write(streams.flush())
                break
            if not text:
                time.sleep(poll_seconds)
    out.flush()
    if job.state not in TERMINAL:
        return EXIT_NOT_FINISHED
    return {"SUCCEEDED": 0, "CANCELLED": EXIT_CANCELLED}.get(job.state, EXIT_FAILED)
