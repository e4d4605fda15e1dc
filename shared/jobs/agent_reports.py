"""What node agents ask for (their config) and tell (phases, exit codes, heartbeats).

The caller is already authenticated (shared.api.auth checks the job token). A job succeeds when every node
of its cluster exits 0 and fails when one fails (unless its job_recovery says restart); the cluster is
then torn down. Each report is one write, or one transaction when it moves the job.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from shared.errors import NotFoundError
from shared.jobs.budget_checks import end_stopped_job
from shared.jobs.containers import node_container
from shared.jobs.costs import cost_with
from shared.jobs.file_mounts import decode_keys, node_file_mounts
from shared.jobs.job_groups import group_view, tell_group
from shared.jobs.job_storage import storage_for_node
from shared.jobs.messages import send_launch, send_teardown
from shared.jobs.node_env import NodePlace, job_display_name, job_group_env, managed_task_ids, node_env
from shared.jobs.nodes import by_rank, nodes_of
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import plan_of
from shared.jobs.recovery import fail_job, recover_job, recovery_options
from shared.jobs.task_records import StoredTaskRefused, load_pipeline_of, read_pipeline_of, secrets_of
from shared.jobs.tokens import attempt_fields
from shared.states import HAS_NODES, JobState, is_terminal
from shared.storage.access import StorageWalls
from shared.store.job_store import NodeFields
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring

PHASES = ("setting_up", "running", "succeeded", "failed", "setup_failed", "preempting", "heartbeat")
ATTEMPTS_ON_RACE = 3
PHASE_ORDER = {"launched": 0, "setting_up": 1, "running": 2, "preempting": 3, "succeeded": 4, "failed": 4,
               "setup_failed": 4}  # fmt: skip
# A heartbeat is written only when the recorded one is older than this share of the silence limit, so a
# live node's record is never staler than silent_after/3 + one heartbeat interval: half the writes at the
# defaults (10 s heartbeats, 60 s limit), and reconcile still never mistakes a live node for a silent one.
HEARTBEAT_WRITE_SHARE = 1 / 3


@dataclass(frozen=True)
class AgentStatus:
    job_id: str
    state: str
    cancel: bool  # the job is over (cancelled, failed elsewhere): the agent stops its task
    stop: bool = False  # the node has no part in the job now: kill the task's process group and exit
    preempt: str | None = (
        None  # a budget stops the job: take it as a preemption notice (checkpoint, write back)
    )


@dataclass(frozen=True)
class AgentReport:
    """What one node tells about its part of a job (the caller has checked the job token: shared.api.auth)."""

    job_id: str
    instance_id: str
    phase: str  # one of PHASES
    exit_code: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class AgentConfig:
    rank: int
    num_nodes: int
    node_ips: list[str]
    gpus_per_node: int
    task_id: str
    setup: str | None
    run: str | None
    envs: dict[str, str]
    workdir_url: str | None
    file_mounts: list[dict[str, Any]]
    log_upload: dict[str, Any]
    heartbeat_seconds: int
    cloud: str = ""
    region: str = ""
    zone: str | None = None
    setup_env: dict[str, str] = field(default_factory=dict)  # SkyPilot's variables for `setup` (node_env)
    run_env: dict[str, str] = field(default_factory=dict)  # ... and for `run`
    workdir_git: dict[str, str | None] | None = None  # {url, ref}: a git workdir the node clones
    attempt: int = 0  # the job's attempt (SKYLESS_ATTEMPT); task_id stays the same across attempts
    storage: list[dict[str, Any]] = field(default_factory=list)  # bucket mounts (shared.jobs.job_storage)
    container: dict[str, Any] | None = None  # docker:<image>: {image, registry, username} (jobs.containers)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def agent_config(wiring: Wiring, job_id: str, instance_id: str) -> AgentConfig | None:
    """The node's config, or None while the cluster is not fully recorded (the API answers 425).
    NotFoundError when the instance is not a node of the job's current cluster (it should stop)."""
    settings = wiring.settings
    job = wiring.store.get(job_id)
    if job is None:
        raise NotFoundError(f"no job {job_id}", field="job_id")
    cluster = wiring.store.cluster(job.cluster_id)
    if cluster is None:
        if JobState(job.state) in (JobState.PROVISIONING, JobState.PLANNED, JobState.RECOVERING):
            return None  # RECOVERING: nodes made before break wait while the earlier attempt is fenced
        raise NotFoundError(f"job {job_id} has no cluster now ({job.state})", field="instance_id")
    nodes = by_rank(cluster)
    ranks = {iid: int(node["rank"]) for iid, node in nodes}
    if instance_id not in ranks:
        raise NotFoundError(f"{instance_id} is not a node of job {job_id}", field="instance_id")
    if len(nodes) < int(cluster.num_nodes):
        return None
    try:  # a group's view reads the group's stored pipeline
        group = group_view(wiring, job) if job.group_id else None
        if job.group_id and group is None:  # a job group's tasks start once every task has its nodes
            _alive_while_waiting(wiring, cluster, instance_id)
            return None
        pipeline = load_pipeline_of(wiring, job)
    except StoredTaskRefused as refused:
        if not is_terminal(JobState(job.state)):  # asked again once failed: failed once
            fail_job(wiring, job, refused.message)
        raise
    rank = ranks[instance_id]
    task_index = int(job.task_index)
    task = pipeline.tasks[task_index]
    plan = plan_of(job)
    candidate = plan.tasks[task_index].candidates[int(job.candidate_index)] if plan else None
    key_prefix = f"runs/{job_id}/logs/{rank}/{int(job.attempt):03d}-"
    workdir_url = wiring.objects.presigned_get(job.workdir_key) if job.workdir_key else None
    node_ips = [str(node["ip"]) for _, node in nodes]
    place = NodePlace(
        cluster_name=cluster.cluster_id,
        cloud=cluster.cloud,
        region=cluster.region,
        zone=cluster.zone,
        accelerator=candidate.accelerator if candidate else None,
        accelerator_count=candidate.accelerator_count if candidate else 0.0,
    )
    if group is not None:  # a member: the group's task ids and name, and every task's addresses
        task_ids = managed_task_ids(
            submitted_at=group.submitted_at,
            job_name=job_display_name(group.name, group.job_id, group.owner),
            task_names=list(group.task_names),
            job_id=group.job_id,
        )
        id_index = int(job.group_index or 0)
    else:
        task_ids = managed_task_ids(
            submitted_at=float(job.created_at),
            job_name=job_display_name(job.name, job.job_id, job.owner),
            task_names=[t.name for t in pipeline.tasks],
            job_id=job.job_id,
        )
        id_index = task_index
    secrets = secrets_of(wiring, job, task_index)
    stages = node_env(
        place=place,
        rank=rank,
        node_ips=node_ips,
        task_ids=task_ids,
        task_index=id_index,
        job_group=group.name if group is not None else None,
    )
    if group is not None:
        peers = job_group_env(group.name, [(peer.name, peer.ips) for peer in group.peers])
        stages.setup.update(peers)
        stages.run.update(peers)
    return AgentConfig(
        rank=rank,
        num_nodes=len(nodes),
        node_ips=node_ips,
        gpus_per_node=int(stages.run["SKYPILOT_NUM_GPUS_PER_NODE"]),
        task_id=task_ids[id_index],
        setup=task.setup,
        run=task.run,
        envs={**task.envs, **secrets},
        workdir_url=workdir_url,
        workdir_git=_git_source(task.workdir),
        file_mounts=node_file_mounts(
            wiring.objects, StorageWalls.of(settings), task, decode_keys(job.file_mounts)
        ),
        log_upload={**wiring.objects.presigned_post(key_prefix), "key_prefix": key_prefix},
        heartbeat_seconds=settings.heartbeat_seconds,
        cloud=cluster.cloud,
        region=cluster.region,
        zone=cluster.zone,
        setup_env=stages.setup,
        run_env=stages.run,
        attempt=int(job.attempt),
        storage=storage_for_node(wiring, job, task, cluster),
        container=node_container(settings, task, cluster.cloud, cluster.region, secrets),
    )


def _alive_while_waiting(wiring: Wiring, cluster: ClusterModel, instance_id: str) -> None:
    """A node waiting for its job group's other tasks is alive: say so as a heartbeat would (reconcile
    must not take a node that waits for its config for a silent one)."""
    now = time.time()
    last = float(nodes_of(cluster)[instance_id].get("heartbeat_at") or 0)
    if now - last >= heartbeat_write_after(wiring):
        wiring.store.update_node(cluster, instance_id, heartbeat_at=now)


def _git_source(workdir: Any) -> dict[str, str | None] | None:
    from shared.task.spec import GitWorkdir  # the config route only: not on every API cold start

    return {"url": workdir.url, "ref": workdir.ref} if isinstance(workdir, GitWorkdir) else None


def report_agent_status(wiring: Wiring, report: AgentReport) -> AgentStatus:
    """Record a node's report and move the job when the report completes a step. Idempotent."""
    job_id, instance_id, phase = report.job_id, report.instance_id, report.phase
    exit_code, message = report.exit_code, report.message
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    for _ in range(ATTEMPTS_ON_RACE):
        job = wiring.store.get(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}", field="job_id")
        cluster = wiring.store.cluster(job.cluster_id)
        if is_terminal(job.state) or cluster is None or instance_id not in nodes_of(cluster):
            return _unrecorded_node_status(job, cluster)
        if _apply_report(wiring, job, cluster, instance_id, phase, exit_code, message):
            over = is_terminal(job.state)
            preempt = None if over else job.budget_stop
            return AgentStatus(job.job_id, job.state, cancel=over, stop=over, preempt=preempt)
    assert job is not None  # the loop ran, and returned on None
    return AgentStatus(job_id, job.state, cancel=is_terminal(job.state), stop=is_terminal(job.state))


def _unrecorded_node_status(job: JobModel, cluster: ClusterModel | None) -> AgentStatus:
    """A report from a node that is not in the job's cluster record. While the attempt's launch is being
    recorded it may yet be (wait); otherwise it is a stray of a launch that lost (or a job that ended):
    it must stop, or the job would have two clusters at work."""
    state = JobState(job.state)
    being_recorded = cluster is None and state in (JobState.PLANNED, JobState.PROVISIONING)
    return AgentStatus(job.job_id, job.state, cancel=is_terminal(state), stop=not being_recorded)


def _apply_report(
    wiring: Wiring,
    job: JobModel,
    cluster: ClusterModel,
    instance_id: str,
    phase: str,
    exit_code: int | None,
    message: str | None,
) -> bool:
    """True when recorded; False when the job moved under us (read again and retry)."""
    store = wiring.store
    now = time.time()
    nodes = nodes_of(cluster)
    node = nodes[instance_id]
    if phase != "heartbeat" and PHASE_ORDER[phase] < PHASE_ORDER.get(str(node.get("phase")), 0):
        phase = "heartbeat"  # a late report of an earlier phase: the node is alive, nothing more
    if phase == "setting_up":
        phase = "heartbeat"  # no step waits on it: a sign of life, written only as a heartbeat would be
    if phase == "heartbeat" and now - float(node.get("heartbeat_at") or 0) < heartbeat_write_after(wiring):
        return True  # recorded recently enough: the write would change nothing reconcile decides on
    fields: dict[str, Any] = {"heartbeat_at": now}
    if phase != "heartbeat":
        fields["phase"] = phase
        if exit_code is not None:
            fields["exit_code"] = int(exit_code)
    node.update(fields)
    rank = int(node["rank"])
    node_update = [NodeFields(cluster, instance_id, fields)]
    state = JobState(job.state)

    # A move that loses a race (another report moved the job) answers ALREADY_DONE: read again, retry.
    if phase == "preempting" and state in HAS_NODES and job.budget_stop:
        store.update_node(cluster, instance_id, **fields)  # written back: the budget's stop ends the job
        return end_stopped_job(wiring, job, {"cluster": cluster.cluster_id, "rank": rank})
    if phase == "preempting" and state in HAS_NODES:
        store.update_node(cluster, instance_id, **fields)
        outcome = recover_job(
            wiring, job, f"preemption notice on node rank {rank}", preempted=True, warned=True
        )
        return outcome != Outcome.ALREADY_DONE
    if phase in ("failed", "setup_failed") and state in HAS_NODES:
        store.update_node(cluster, instance_id, **fields)
        ended = JobState.FAILED_SETUP if phase == "setup_failed" else JobState.FAILED
        return _on_node_failed(wiring, job, rank, exit_code, message, ended) != Outcome.ALREADY_DONE
    moved = _move_if_step_complete(wiring, job, cluster, nodes, phase, node_update)  # `nodes` has this report
    if moved is not None:
        return moved
    if not store.update_node(cluster, instance_id, **fields):
        return True  # the node is not in that cluster record any more: nothing to record
    # Nodes reporting at once each read the others' old phases before writing their own; deciding again
    # on a fresh read means whichever report reads last sees every write and moves the job.
    fresh = store.cluster(cluster.cluster_id)
    if fresh is None:
        return True
    moved = _move_if_step_complete(wiring, job, fresh, nodes_of(fresh), phase, [])
    return True if moved is None else moved


def heartbeat_write_after(wiring: Wiring) -> float:
    return wiring.settings.silent_after_seconds * HEARTBEAT_WRITE_SHARE


def _move_if_step_complete(
    wiring: Wiring,
    job: JobModel,
    cluster: ClusterModel,
    nodes: dict[str, dict[str, Any]],
    phase: str,
    node_update: list[NodeFields],
) -> bool | None:
    """Move the job when every node has reached the step `phase` completes; None if none is.
    `node_update` (the report's own write) goes into the move's transaction."""
    state = JobState(job.state)
    phases = [n.get("phase") for n in nodes.values()]
    if phase == "succeeded" and state in HAS_NODES and all(p == "succeeded" for p in phases):
        return _on_all_succeeded(wiring, job, cluster, node_update)
    started = all(p in ("running", "succeeded") for p in phases)
    if phase in ("running", "succeeded") and state == JobState.SETTING_UP and started:
        # The last node's own `running` is not written: the job's RUNNING says it (shared/jobs/nodes.py).
        moved = wiring.store.move(job, JobState.RUNNING, "every node is running")
        if moved:
            tell_group(wiring, job)
        return moved
    return None


def _on_node_failed(
    wiring: Wiring, job: JobModel, rank: int, exit_code: int | None, message: str | None, ended: JobState
) -> Outcome:
    """A setup failure counts as a run failure does, as SkyPilot's managed jobs count both (user code
    failures: sky/jobs/controller.py, `should_restart_on_failure`); once no restart is left the job ends in
    FAILED_SETUP rather than FAILED."""
    options = recovery_options(wiring, job)
    what = f"node rank {rank} failed" + (f" with exit code {exit_code}" if exit_code is not None else "")
    if message:
        what += f": {message[:300]}"
    failure: dict[str, Any] = {"task_failed": True, "setup_failed": ended is JobState.FAILED_SETUP}
    if exit_code is not None:
        failure["exit_code"] = int(exit_code)
    if exit_code is not None and exit_code in options["recover_on_exit_codes"]:
        listed = f"{what} (recover_on_exit_codes)"
        return recover_job(
            wiring, job, listed, preempted=False, counts_as_restart=True, spends_a_restart=False,
            extra_detail={**failure, "exit_code_listed": True},
        )  # fmt: skip
    allowed = int(options["max_restarts_on_errors"])
    if int(job.restarts) < allowed:
        restart = f"{what} (restart {int(job.restarts) + 1})"
        counted = {"restart_number": int(job.restarts) + 1, "max_restarts": allowed}
        return recover_job(
            wiring, job, restart, preempted=False, counts_as_restart=True, extra_detail={**failure, **counted}
        )
    return fail_job(wiring, job, what, ended)


def _on_all_succeeded(
    wiring: Wiring, job: JobModel, cluster: ClusterModel, node_update: list[NodeFields]
) -> bool:
    pipeline_length = len(read_pipeline_of(wiring, job).tasks)
    next_task = int(job.task_index) + 1
    if next_task < pipeline_length:
        moved = wiring.store.move(
            job,
            JobState.PLANNED,
            f"task {next_task} of {pipeline_length} done; next task",
            changes={
                "task_index": next_task,
                **attempt_fields(wiring.settings, job.job_id, int(job.attempt) + 1),
                "cluster_id": None,
                "candidate_index": 0,
                "restarts": 0,
                "cost": cost_with(job, cluster),
            },
        )
        if moved:
            send_teardown(wiring, job.job_id, int(job.attempt) - 1, cluster.cluster_id)
            send_launch(wiring, job.job_id, int(job.attempt))
        return moved
    changes = {"cost": cost_with(job, cluster)}
    # The last node's own phase is not written: once the job has moved on, nothing reads it (one item less).
    moved = wiring.store.move(job, JobState.SUCCEEDED, "every node exited 0", changes=changes)
    if moved:
        send_teardown(wiring, job.job_id, int(job.attempt), cluster.cluster_id)
        tell_group(wiring, job)
    return moved
