"""A cluster's job queue: queue a job (launch, exec), start what fits (queue_policy), end a job.

The live part of the queue is the cluster item's `active` map, so that whoever decides what starts reads
and writes one item: a start is a transaction of the cluster (on its version: two schedulers cannot both
spend the same free node) and the jobs it starts (each on its own state and version). A job that ends leaves
`active` in one transaction with its own terminal move; the cluster's version goes up with every change, so
a decision taken on an older reading fails and is taken again.
"""

from __future__ import annotations

import json
import time
from typing import Any

from shared.clusters.facts import active_of, capacity_of, nodes_by_rank, queued_jobs
from shared.clusters.queue_policy import QueuedJob, fits_at_all, jobs_to_start
from shared.clusters.states import (
    ClusterJobState,
    ClusterState,
    is_job_terminal,
    job_transition,
)
from shared.errors import ConflictError, UserError
from shared.store.cluster_records import ClusterJobModel, ClusterStore, NamedClusterModel
from shared.wiring import Wiring

ATTEMPTS_ON_RACE = 8
MAX_INLINE_TASK_BYTES = 8 * 1024


def job_prefix(key: str, number: int) -> str:
    """Where a cluster job's files live in the bucket: its task (when large), secrets and logs."""
    return f"clusters/{key}/jobs/{int(number):08d}/"


def log_prefix(key: str, number: int, rank: int) -> str:
    return f"{job_prefix(key, number)}logs/{int(rank)}/"


def queue_job(
    wiring: Wiring,
    store: ClusterStore,
    cluster: NamedClusterModel,
    *,
    owner: str,
    pipeline: Any,
    with_setup: bool,
    workdir_key: str | None,
    file_mount_keys: dict[str, str],
    accepting: frozenset[ClusterState],
) -> ClusterJobModel:
    """Record a PENDING job on the cluster and put it in the live queue; ConflictError when the cluster
    is not (any more) in one of `accepting` (a `down` that won the race, say)."""
    task = pipeline.tasks[0]
    number = store.next_job_number(cluster, [s.value for s in accepting])
    if number is None:
        raise _not_accepting(store, cluster)
    gpus, num_nodes = job_demand(task)
    data = pipeline.model_dump(mode="json", by_alias=True, exclude_none=True)
    secrets = data["tasks"][0].pop("secrets", None)
    prefix = job_prefix(cluster.key, number)
    if secrets:
        wiring.objects.put_text(prefix + "secrets.json", json.dumps(secrets))
    text = json.dumps(data, separators=(",", ":"))
    fields: dict[str, Any] = {"task": text}
    if len(text.encode()) > MAX_INLINE_TASK_BYTES:
        wiring.objects.put_text(prefix + "task.json", text)
        fields = {"task_key": prefix + "task.json"}
    job = store.new_job(
        cluster.key,
        number,
        owner=owner,
        name=task.name or pipeline.name,
        state=ClusterJobState.PENDING.value,
        with_setup=with_setup and bool(task.setup),
        workdir_key=workdir_key,
        file_mounts=json.dumps(file_mount_keys, sort_keys=True) if file_mount_keys else None,
        num_nodes=num_nodes,
        gpus=gpus,
        command=_first_line(task.run),
        **fields,
    )
    entry = {"state": ClusterJobState.PENDING.value, "gpus": gpus, "nodes": num_nodes}
    put = ("put", job, None, store.jobs.pk.does_not_exist())
    queued = store.write_cluster(
        cluster,
        {("active", str(number)): entry, "idle_since": None},
        check="none",
        require_states=[s.value for s in accepting],
        also=[put],
        message=f"job {number} queued" + (f": {job.command}" if job.command else ""),
        kind="job",
    )
    if not queued:
        raise _not_accepting(store, cluster)
    schedule_jobs(wiring, cluster.key)
    return store.job(cluster.key, number) or job


def _not_accepting(store: ClusterStore, cluster: NamedClusterModel) -> ConflictError:
    latest = store.get(cluster.key)
    state = latest.state if latest is not None else ClusterState.TERMINATED.value
    return ConflictError(
        f"cluster {cluster.name} is {state}: it takes no new job now",
        field="cluster",
        hint="`skyless start` a STOPPED cluster; `skyless launch -c` brings one back after `down`",
    )


def job_demand(task: Any) -> tuple[float, int]:
    """(accelerators per node, nodes) a task asks for: its first resource alternative's accelerators."""
    requests = task.resource_choice().requests
    first = requests[0] if requests else None
    gpus = float(first.accelerator_count) if first is not None and first.accelerator else 0.0
    return gpus, int(task.num_nodes or 1)


def check_job_fits(cluster: NamedClusterModel, task: Any, *, field: str = "task") -> None:
    """A UserError when the task could never run on the cluster (too many nodes, accelerators it lacks)."""
    gpus, num_nodes = job_demand(task)
    why = fits_at_all(QueuedJob(0, False, num_nodes, gpus), capacity_of(cluster))
    requests = task.resource_choice().requests
    wanted = {r.accelerator for r in requests if r.accelerator}
    if why is None and wanted and cluster.accelerator not in wanted:
        have = cluster.accelerator or "no accelerator"
        why = f"it needs {' or '.join(sorted(wanted))}; the cluster has {have}"
    if why is not None:
        raise UserError(f"the task does not fit cluster {cluster.name}: {why}", field=field)


def schedule_jobs(wiring: Wiring, key: str) -> list[int]:
    """Start every queued job that fits now (FIFO); answers the numbers started by this call."""
    store = ClusterStore(wiring.settings)
    for _ in range(ATTEMPTS_ON_RACE):
        cluster = store.get(key)
        if cluster is None or cluster.state != ClusterState.UP:
            return []
        if _fail_misfits(store, cluster):
            continue  # the queue changed: read it again
        starting = jobs_to_start(queued_jobs(cluster), capacity_of(cluster))
        if not starting:
            return []
        ranks = [iid for iid, _ in nodes_by_rank(cluster)]
        now = time.time()
        items = []
        changes: dict[Any, Any] = {}
        for number in starting:
            job = store.job(key, number)
            if job is None or job.state != ClusterJobState.PENDING:
                changes[("active", str(number))] = None  # left over from a job that ended: clean it
                continue
            to = ClusterJobState.SETTING_UP if job.with_setup else ClusterJobState.RUNNING
            job_transition(job.state, to)
            assigned = {
                iid: {"rank": rank, "phase": "assigned"}
                for rank, iid in enumerate(ranks[: int(job.num_nodes)])
            }
            items.append(store.job_update(job, {"state": to.value, "started_at": now, "nodes": assigned}))
            changes[("active", str(number), "state")] = to.value
        started = [n for n in starting if ("active", str(n), "state") in changes]
        message = "started job(s) " + ", ".join(str(n) for n in started) if started else None
        if store.write_cluster(cluster, changes, also=items, message=message, kind="job"):
            return started
    return []


def _fail_misfits(store: ClusterStore, cluster: NamedClusterModel) -> bool:
    """Queued jobs that could never run on this cluster (queued while it was still being provisioned) fail
    with the reason, rather than hold the FIFO queue forever. True when one did."""
    capacity = capacity_of(cluster)
    failed = False
    for queued in queued_jobs(cluster):
        why = None if queued.started else fits_at_all(queued, capacity)
        job = store.job(cluster.key, queued.number) if why else None
        if job is not None and job.state == ClusterJobState.PENDING:
            failed |= end_job(
                store, cluster.key, job, ClusterJobState.FAILED, f"does not fit the cluster: {why}"
            )
    return failed


def end_job(
    store: ClusterStore,
    key: str,
    job: ClusterJobModel,
    to: ClusterJobState,
    reason: str | None,
    extra: dict[Any, Any] | None = None,
) -> bool:
    """Move a live job to a terminal state and take it out of the live queue, in one transaction.
    False when the job had already ended (a duplicate)."""
    for _ in range(ATTEMPTS_ON_RACE):
        if is_job_terminal(job.state):
            return False
        job_transition(job.state, to)
        changes = {"state": to.value, "reason": reason, "ended_at": time.time(), **(extra or {})}
        cluster = store.get(key)
        if cluster is None:
            return False
        text = f"job {int(job.number)} {to.value}" + (f": {reason}" if reason else "")
        ended = store.write_cluster(
            cluster,
            {("active", str(int(job.number))): None},
            check="none",
            also=[store.job_update(job, changes)],
            message=text,
            kind="job",
        )
        if ended:
            return True
        latest = store.job(key, int(job.number))
        if latest is None:
            return False
        job = latest
    return False


def cancel_jobs(wiring: Wiring, cluster: NamedClusterModel, numbers: list[int] | None) -> list[int]:
    """Cancel the given live jobs (None: every live job); the agents stop them at their next poll."""
    from shared.clusters.autostop import mark_idle_if_idle

    store = ClusterStore(wiring.settings)
    wanted = sorted(active_of(cluster)) if numbers is None else numbers
    cancelled = []
    for number in wanted:
        job = store.job(cluster.key, number)
        if job is None:
            continue
        if end_job(store, cluster.key, job, ClusterJobState.CANCELLED, "cancelled by the user"):
            cancelled.append(number)
    if cancelled:
        schedule_jobs(wiring, cluster.key)
        mark_idle_if_idle(wiring, cluster.key)
    return cancelled


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    line = next((part.strip() for part in text.strip().splitlines() if part.strip()), "")
    return line[:120] or None
