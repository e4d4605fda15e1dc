"""The SDK's verbs on named clusters, as `sky.launch`, `sky.exec`, `sky.status`, `sky.queue`, `sky.cancel`,
`sky.tail_logs`, `sky.down`, `sky.stop`, `sky.start`, `sky.autostop` and `sky.cost_report` name them.

Each call does its work and answers a typed result (SkyPilot's newer SDK answers a request id that
`sky.get` turns into the result; `get` and `stream_and_get` here take the result itself, so both forms of a
script work). A mistake (a task field, a config key, an unknown cluster) raises a `skyless.UserError` that
names the field; an API refusal an `ApiError` with its status.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import sys
import time
from typing import IO, Any, TypeVar

from shared.errors import UserError
from skyless.connection import connected, say_notes, submission
from skyless.results import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_NOT_FINISHED,
    EXIT_SUCCEEDED,
    ClusterHandle,
    ClusterStatus,
    CostEntry,
    JobRecord,
    LaunchResult,
    launch_result,
)
from skyless.task import Task

T = TypeVar("T")
JOB_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "FAILED_SETUP", "CANCELLED"})
EXIT_CODES = {"SUCCEEDED": EXIT_SUCCEEDED, "CANCELLED": EXIT_CANCELLED}


def launch(
    task: Task,
    cluster_name: str | None = None,
    *,
    idle_minutes_to_autostop: int | None = None,
    down: bool = False,
    fast: bool = False,
    optimize_target: str = "cost",
    clouds: list[str] | None = None,
    dryrun: bool = False,
    retry_until_up: bool = False,
    no_setup: bool = False,
) -> LaunchResult:
    """Provision `cluster_name` if it is new (reuse it if UP, start it if STOPPED) and queue `task` on it,
    running its setup first unless `fast`. Answers once the job is queued: follow it with `tail_logs`.

    No `cluster_name`: a new cluster named as SkyPilot names one (`sky-<hex>-<user>`). `down=True` tears
    the cluster down once idle (after `idle_minutes_to_autostop`, default 0). `optimize_target`: "cost"
    or "time". `dryrun`, `retry_until_up`, `no_setup`: not supported here (raise, saying why)."""
    _refuse(dryrun=(dryrun, "plan a task with `skyless plan FILE` (like sky launch --dryrun)"),
            retry_until_up=(retry_until_up, "a cluster's launch fails over across every planned place"),
            no_setup=(no_setup, "use fast=True on an existing cluster to skip setup"))  # fmt: skip
    name = cluster_name or _generated_name()
    idle = 0 if down and idle_minutes_to_autostop is None else idle_minutes_to_autostop
    with connected() as client:
        sent = submission(client, task, clouds)
        say_notes(sent.config_notes)
        answer = client.launch_on_cluster(
            name, sent.text, filename=sent.filename, minimize=_objective(optimize_target),
            clouds=sent.clouds, workdir_key=sent.workdir_key, file_mount_keys=sent.mount_keys, fast=fast,
            idle_minutes=idle, down=down or None,
        )  # fmt: skip
    say_notes(answer.notes)
    return launch_result(answer, sent.config_notes)


def exec(task: Task | str, cluster_name: str) -> LaunchResult:
    """Queue `task` (or a shell command) on the UP cluster `cluster_name`: no provisioning, no setup; the
    workdir and local file mounts are uploaded and synced."""
    with connected() as client:
        if isinstance(task, str):
            job = client.exec_on_cluster(cluster_name, command=task)
            notes: list[str] = []
        else:
            sent = submission(client, task)
            notes = [*sent.task_notes, *sent.config_notes]
            say_notes(notes)
            job = client.exec_on_cluster(
                cluster_name, task=sent.text, filename=sent.filename, workdir_key=sent.workdir_key,
                file_mount_keys=sent.mount_keys,
            )  # fmt: skip
        view = client.get_cluster(cluster_name)
    return LaunchResult(job.job, ClusterHandle(cluster_name, ClusterStatus.of(view), "queued", notes))


def status(
    cluster_names: str | list[str] | None = None, refresh: bool = False, all_users: bool = False
) -> list[ClusterStatus]:
    """Your clusters (or those named). `refresh` changes nothing: the control plane keeps the records
    current. `all_users`: not supported (an admin lists everyone's with the CLI)."""
    _refuse(all_users=(all_users, "the SDK lists the caller's clusters"))
    del refresh
    names = [cluster_names] if isinstance(cluster_names, str) else cluster_names
    with connected() as client:
        views = client.list_clusters()
    found = [ClusterStatus.of(v) for v in views if names is None or v.name in names]
    return found


def queue(cluster_name: str, skip_finished: bool = False, all_users: bool = False) -> list[JobRecord]:
    """The cluster's jobs, newest first (`skip_finished`: only those not ended)."""
    _refuse(all_users=(all_users, "a cluster's queue is its owner's"))
    with connected() as client:
        jobs = [JobRecord.of(job) for job in client.cluster_queue(cluster_name)]
    jobs.sort(key=lambda job: job.job_id, reverse=True)
    return [job for job in jobs if not (skip_finished and job.status in JOB_TERMINAL)]


def cancel(
    cluster_name: str, job_ids: list[int] | None = None, all: bool = False, all_users: bool = False
) -> list[int]:
    """Cancel jobs of the cluster (`all`: every job not ended); answers the numbers cancelled. Cancelling
    an ended job again is harmless."""
    _refuse(all_users=(all_users, "a cluster's jobs are its owner's"))
    if not job_ids and not all:
        raise UserError("name the jobs to cancel, or all=True", field="job_ids")
    targets: list[int | str] = ["all"] if all else list(job_ids or [])
    cancelled: list[int] = []
    with connected() as client:
        for target in targets:
            cancelled += client.cancel_cluster_job(cluster_name, target)
    return cancelled


def tail_logs(
    cluster_name: str,
    job_id: int | None = None,
    follow: bool = True,
    tail: int = 0,
    output_stream: IO[str] | None = None,
    *,
    poll_seconds: float = 0.5,
) -> int:
    """Write the job's log (every node's, prefixed `(head, rank=0)` … on several nodes; default: the
    newest job) to `output_stream` (stdout), following it until the job ends if `follow`; `tail` > 0:
    only the last lines already written. Answers sky's exit code: 0 succeeded, 100 failed,
    101 not finished (without follow), 103 cancelled."""
    out = output_stream or sys.stdout
    cursors: dict[int, str | None] = {}
    finished: dict[int, bool] = {}
    first_page = True
    with connected() as client:
        number = job_id if job_id is not None else client.cluster_logs(cluster_name, "latest").job
        while True:
            text, state, ranks = _read_logs(client, cluster_name, number, cursors, finished)
            if first_page and tail > 0:
                text = "".join(text.splitlines(keepends=True)[-tail:])
            first_page = False
            if text:
                out.write(text)
                out.flush()
            done = state in JOB_TERMINAL and all(finished.get(r) for r in range(ranks))
            if done or (not follow and not text):
                break
            if not text:
                if client.get_cluster(cluster_name).state == "TERMINATED":  # torn down under the job
                    break
                time.sleep(poll_seconds)
    if state not in JOB_TERMINAL:
        return EXIT_NOT_FINISHED
    return EXIT_CODES.get(state, EXIT_FAILED)


def down(cluster_name: str, purge: bool = False) -> ClusterStatus:
    """Terminate every node of the cluster; its name is free again."""
    _refuse(purge=(purge, "skyless's records follow the clouds' own answers"))
    return _act(cluster_name, "down")


def stop(cluster_name: str, purge: bool = False) -> ClusterStatus:
    """Stop the cluster's nodes; their disks stay (`start` brings them back)."""
    _refuse(purge=(purge, "skyless's records follow the clouds' own answers"))
    return _act(cluster_name, "stop")


def start(
    cluster_name: str,
    idle_minutes_to_autostop: int | None = None,
    down: bool = False,
    retry_until_up: bool = False,
    force: bool = False,
) -> ClusterStatus:
    """Start a STOPPED cluster (answers at once; `status` shows it UP when its nodes are back); with
    `idle_minutes_to_autostop`, set its autostop too."""
    _refuse(retry_until_up=(retry_until_up, "a start is retried by the control plane"),
            force=(force, "starting an UP cluster changes nothing"))  # fmt: skip
    view = _act(cluster_name, "start")
    if idle_minutes_to_autostop is not None or down:
        return autostop(
            cluster_name, 0 if idle_minutes_to_autostop is None else idle_minutes_to_autostop, down
        )
    return view


def autostop(cluster_name: str, idle_minutes: int, down: bool = False) -> ClusterStatus:
    """Stop (or with `down`, tear down) the cluster after `idle_minutes` with no job and no open shell;
    -1 turns autostop off."""
    with connected() as client:
        return ClusterStatus.of(client.set_autostop(cluster_name, idle_minutes, down=down))


def cost_report(days: int | None = None) -> list[CostEntry]:
    """What your live clusters and your managed jobs of the last `days` (default 30) cost so far."""
    with connected() as client:
        clusters = client.list_clusters()
        report = client.cost_report(days=days or 30, by="job")
    return [*(CostEntry.of_cluster(v) for v in clusters), *(CostEntry.of_job(j) for j in report.jobs)]


def get(result: T) -> T:
    """The result itself: `skyless.get(skyless.launch(...))` reads as `sky.get(sky.launch(...))` does."""
    return result


def stream_and_get(result: T, output_stream: IO[str] | None = None) -> T:
    """With a launch or exec result: write its job's log until the job ends, then answer the result (as
    `sky.stream_and_get` does with a request id); any other result is answered as it is."""
    if isinstance(result, LaunchResult):
        tail_logs(result.handle.cluster_name, result.job_id, follow=True, output_stream=output_stream)
    return result


def _act(cluster_name: str, action: str) -> ClusterStatus:
    with connected() as client:
        return ClusterStatus.of(client.cluster_action(cluster_name, action))


def _read_logs(
    client: Any, name: str, number: int, cursors: dict[int, str | None], finished: dict[int, bool]
) -> tuple[str, str, int]:
    """New text of every node's log of the job, its state, and its node count."""
    first = client.cluster_logs(name, number, rank=0, after=cursors.get(0))
    pages = {0: first}
    for rank in range(1, first.num_nodes):
        pages[rank] = client.cluster_logs(name, number, rank=rank, after=cursors.get(rank))
    out: list[str] = []
    for rank, page in pages.items():
        cursors[rank] = page.cursor or cursors.get(rank)
        finished[rank] = page.finished
        if page.text and first.num_nodes > 1:
            prefix = "(head, rank=0) " if rank == 0 else f"(worker{rank}, rank={rank}) "
            out.append("".join(prefix + line for line in page.text.splitlines(keepends=True)))
        elif page.text:
            out.append(page.text)
    return "".join(out), first.state, first.num_nodes


def _refuse(**given: tuple[bool, str]) -> None:
    """A UserError naming the first SkyPilot argument set that skyless does not act on, and why."""
    for name, (value, why) in given.items():
        if value:
            raise UserError(f"not supported by skyless: {why}", field=name)


def _objective(target: Any) -> str:
    value = str(getattr(target, "name", target)).lower()
    if value not in ("cost", "time"):
        raise UserError(f"must be cost or time, not {target!r}", field="optimize_target")
    return value


def _generated_name() -> str:
    """SkyPilot's form for a cluster launched without a name: `sky-<4 hex>-<user>`."""
    user = "".join(c for c in getpass.getuser().lower() if c.isalnum() or c == "-") or "user"
    return f"sky-{hashlib.sha256(os.urandom(8)).hexdigest()[:4]}-{user[:20]}"
