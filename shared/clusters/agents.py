"""What the agents of a named cluster ask (work) and tell (presence, open shells, each job's phases).

An agent in cluster mode polls (`poll_cluster`) every `cluster_poll_seconds`: the answer names the jobs it
should start (with their configs), the ones it should stop, and whether to exit (the cluster is stopping or
gone). The poll is also its heartbeat and how it reports open shells; it writes only when something changed
or the recorded heartbeat is getting old, so an idle cluster costs one read per poll (README: idle cost).
A job ends when every node of it has reported: succeeded on all, or failed on one (the others are told to
stop at their next poll).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from pynamodb.exceptions import UpdateError

from shared.api.auth import NODE_KEY_HEADER, bearer_token
from shared.clusters.autostop import mark_idle_if_idle
from shared.clusters.facts import active_of, nodes_by_rank, nodes_of, plain
from shared.clusters.job_queue import end_job, log_prefix, schedule_jobs
from shared.clusters.states import JOB_STARTED, ClusterJobState, ClusterState, is_job_terminal
from shared.clusters.tokens import (
    check_cluster_boot_token,
    cluster_agent_token,
    token_matches,
)
from shared.config import Settings
from shared.errors import AuthError, NotFoundError, UserError
from shared.jobs.file_mounts import decode_keys, node_file_mounts
from shared.jobs.node_env import TIMESTAMP_FORMAT, NodePlace, node_env
from shared.jobs.tokens import token_hash
from shared.storage.access import StorageWalls
from shared.store.cluster_records import ClusterJobModel, ClusterStore, NamedClusterModel
from shared.task.spec import GitWorkdir, Pipeline
from shared.wiring import Wiring, wiring_for

PHASES = ("setting_up", "running", "succeeded", "failed", "setup_failed")
PHASE_ORDER = {"assigned": 0, "setting_up": 1, "running": 2, "succeeded": 3, "failed": 3, "setup_failed": 3}
HEARTBEAT_WRITE_SHARE = 1 / 3  # as for job nodes: a record never older than silent_after/3 + one poll
STARTED = {s.value for s in JOB_STARTED}
CANCELLING = {
    ClusterJobState.CANCELLED.value,
    ClusterJobState.FAILED.value,
    ClusterJobState.FAILED_SETUP.value,
}
EXIT_STATES = {ClusterState.STOPPING, ClusterState.STOPPED, ClusterState.TERMINATING, ClusterState.TERMINATED}
ATTEMPTS_ON_RACE = 8
CLAIM_FIELD = "boot_claim"


@dataclass(frozen=True)
class PollAnswer:
    state: str
    start: list[dict[str, Any]] = field(default_factory=list)  # configs of jobs to start now
    cancel: list[int] = field(default_factory=list)  # jobs to stop
    poll_seconds: float = 2.0
    exit: bool = False  # the cluster is stopping or gone: stop everything and exit
    ssh_keys: list[str] = field(default_factory=list)  # public keys for ~/.ssh/authorized_keys

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def authenticate_cluster_agent(headers: Mapping[str, str], key: str, settings: Settings) -> NamedClusterModel:
    """The caller holds the cluster's agent token; an unknown cluster answers like a wrong token. Answers
    the cluster as read (consistently), so that a poll needs no second read."""
    token = bearer_token(headers)
    cluster = ClusterStore(settings).get(key)
    if cluster is None or not token_matches(token, cluster.token_hash):
        raise AuthError("credentials not recognised for this cluster", field="Authorization")
    return cluster


@dataclass(frozen=True)
class ClusterBootCaller:
    """A node of the cluster holding its boot token, and the key its agent made for itself at start."""

    cluster: NamedClusterModel
    node_key: str


def authenticate_cluster_boot(headers: Mapping[str, str], key: str, settings: Settings) -> ClusterBootCaller:
    token = bearer_token(headers)
    node_key = {name.lower(): value for name, value in headers.items()}.get(NODE_KEY_HEADER, "").strip()
    cluster = ClusterStore(settings).get(key)
    if cluster is None or not check_cluster_boot_token(settings, key, token):
        raise AuthError("credentials not recognised for this cluster", field="Authorization")
    if not 16 <= len(node_key) <= 256:
        raise AuthError("the node's own key is missing", field="X-Skyless-Node-Key",
                        hint="the agent sends a random key of its own with its boot token")  # fmt: skip
    return ClusterBootCaller(cluster, node_key)


def claim_cluster_node(settings: Settings, caller: ClusterBootCaller, instance_id: str) -> str | None:
    """The cluster's agent token for the node's first claim (or the same agent asking again); None while
    the node is not recorded yet (answer 425). AuthError when another agent claimed this node already."""
    store = ClusterStore(settings)
    cluster = store.get(caller.cluster.key) or caller.cluster
    if instance_id not in nodes_of(cluster):
        if cluster.state == ClusterState.INIT:
            return None
        raise NotFoundError(f"{instance_id} is not a node of cluster {cluster.key}", field="instance_id")
    claim = token_hash(caller.node_key)
    node = store.clusters.nodes[instance_id]
    condition = node.exists() & (node[CLAIM_FIELD].does_not_exist() | (node[CLAIM_FIELD] == claim))
    try:
        cluster.update(actions=[node[CLAIM_FIELD].set(claim)], condition=condition)
    except UpdateError as error:
        if "ConditionalCheckFailed" in (error.cause_response_code or ""):
            raise AuthError("this node's boot credential has been used", field="Authorization") from None
        raise
    return cluster_agent_token(settings, cluster.key)


def poll_cluster(
    settings: Settings,
    key: str,
    *,
    instance_id: str,
    have: list[int],
    running: list[int],
    sessions: int,
    cluster: NamedClusterModel | None = None,
) -> PollAnswer:
    """`cluster`: the record as the caller just read it (authentication does), else it is read here."""
    wiring = wiring_for(settings)
    store = ClusterStore(settings)
    every = settings.cluster_poll_seconds
    cluster = cluster if cluster is not None and cluster.key == key else store.get(key)
    if cluster is None:
        raise NotFoundError(f"no cluster {key}", field="cluster")
    state = ClusterState(cluster.state)
    if state in EXIT_STATES:
        return PollAnswer(state.value, cancel=list(running), poll_seconds=every, exit=True)
    nodes = nodes_of(cluster)
    if state == ClusterState.INIT:
        return PollAnswer(state.value, poll_seconds=every)  # still launching or starting: ask again
    if instance_id not in nodes:
        raise NotFoundError(f"{instance_id} is not a node of cluster {key}", field="instance_id")
    _record_presence(wiring, store, cluster, instance_id, nodes[instance_id], sessions)
    active = active_of(cluster)
    pending = any(entry.get("state") == ClusterJobState.PENDING for entry in active.values())
    if pending and schedule_jobs(wiring, key):
        cluster = store.get(key) or cluster
        active = active_of(cluster)
    rank = int(nodes[instance_id]["rank"])
    known = set(have) | set(running)
    start = []
    for number, entry in sorted(active.items()):
        if entry.get("state") not in STARTED or rank >= int(entry.get("nodes") or 1) or number in known:
            continue
        job = store.job(key, number)
        node = plain(job.nodes).get(instance_id) if job is not None else None
        if job is not None and node is not None and node.get("phase") == "assigned":
            start.append(job_config(wiring, cluster, job, instance_id))
    cancel = [n for n in running if active.get(n, {}).get("state") not in STARTED]
    keys = json.loads(cluster.ssh_keys) if cluster.ssh_keys else []
    return PollAnswer(cluster.state, start=start, cancel=cancel, poll_seconds=every, ssh_keys=keys)


def _record_presence(
    wiring: Wiring,
    store: ClusterStore,
    cluster: NamedClusterModel,
    instance_id: str,
    node: dict[str, Any],
    sessions: int,
) -> bool:
    """Write the node's heartbeat, readiness and open shells when one changed or the heartbeat is old."""
    now = time.time()
    fields: dict[str, Any] = {}
    if (
        now - float(node.get("heartbeat_at") or 0)
        >= wiring.settings.silent_after_seconds * HEARTBEAT_WRITE_SHARE
    ):
        fields["heartbeat_at"] = now
    if not node.get("ready"):
        fields.update(ready=True, heartbeat_at=now)
    before = int(node.get("sessions") or 0)
    if sessions != before:
        fields["sessions"] = int(sessions)
    if not fields:
        return False
    changes: dict[Any, Any] = {("nodes", instance_id, name): value for name, value in fields.items()}
    if sessions > 0 and before == 0:
        changes["idle_since"] = None  # in use: the idle period (if any) is over
    text = None
    if "sessions" in fields:
        text = f"node rank {int(node['rank'])}: {sessions} open shell(s)"
    written = store.write_cluster(
        cluster, changes, check="none", require_states=[ClusterState.UP.value], message=text, kind="ssh"
    )
    if written and sessions == 0 and before > 0:
        mark_idle_if_idle(wiring, cluster.key)
    return written  # what is decided next reads `active`, which this write leaves as it was


def cluster_task_id(submitted_at: float, cluster_name: str, number: int) -> str:
    """SKYPILOT_TASK_ID of a job on a cluster, in SkyPilot's format `sky-<time>_<cluster>_<job id>`."""
    stamp = datetime.fromtimestamp(submitted_at, UTC).strftime(TIMESTAMP_FORMAT)
    return f"sky-{stamp}_{cluster_name}_{number}"


def job_task(wiring: Wiring, job: ClusterJobModel) -> Any:
    text = job.task or (wiring.objects.get_text(job.task_key) if job.task_key else None)
    if text is None:
        raise LookupError(f"cluster job {job.key}/{job.number} has no task")
    return Pipeline.model_validate(json.loads(text)).tasks[0]


def job_config(
    wiring: Wiring, cluster: NamedClusterModel, job: ClusterJobModel, instance_id: str
) -> dict[str, Any]:
    """What a node needs to run its part of a job (the job agent's config, plus `job`)."""
    task = job_task(wiring, job)
    number = int(job.number)
    ranked = nodes_by_rank(cluster)[: int(job.num_nodes)]
    rank = next(r for r, (iid, _) in enumerate(ranked) if iid == instance_id)
    node_ips = [str(node["ip"]) for _, node in ranked]
    place = NodePlace(
        cluster_name=cluster.name,
        cloud=str(cluster.cloud),
        region=str(cluster.region),
        zone=cluster.zone,
        accelerator=cluster.accelerator,
        accelerator_count=float(cluster.accelerator_count or 0),
    )
    task_id = cluster_task_id(float(job.submitted_at), cluster.name, number)
    stages = node_env(place=place, rank=rank, node_ips=node_ips, task_ids=[task_id], task_index=0)
    secrets_text = wiring.objects.get_text(f"clusters/{cluster.key}/jobs/{number:08d}/secrets.json")
    secrets = dict(json.loads(secrets_text)) if secrets_text else {}
    prefix = log_prefix(cluster.key, number, rank)
    workdir = task.workdir
    return {
        "job": number,
        "rank": rank,
        "num_nodes": len(ranked),
        "node_ips": node_ips,
        "gpus_per_node": int(stages.run["SKYPILOT_NUM_GPUS_PER_NODE"]),
        "task_id": task_id,
        "setup": task.setup if job.with_setup else None,
        "run": task.run,
        "envs": {**task.envs, **secrets},
        "setup_env": stages.setup,
        "run_env": stages.run,
        "workdir_url": wiring.objects.presigned_get(job.workdir_key) if job.workdir_key else None,
        "workdir_git": {"url": workdir.url, "ref": workdir.ref} if isinstance(workdir, GitWorkdir) else None,
        "file_mounts": node_file_mounts(
            wiring.objects, StorageWalls.of(wiring.settings), task, decode_keys(job.file_mounts)
        ),
        "log_upload": {**wiring.objects.presigned_post(prefix), "key_prefix": prefix},
    }


@dataclass(frozen=True)
class JobReportAnswer:
    job: int
    state: str
    cancel: bool  # the job is over (cancelled, failed on another node): stop it


def report_cluster_job(
    settings: Settings,
    key: str,
    number: int,
    *,
    instance_id: str,
    phase: str,
    exit_code: int | None = None,
    message: str | None = None,
) -> JobReportAnswer:
    """Record a node's phase of a job and move the job when the phases complete a step. Idempotent."""
    if phase not in PHASES:
        raise UserError(f"unknown phase {phase!r}", field="phase")
    wiring = wiring_for(settings)
    store = ClusterStore(settings)
    for _ in range(ATTEMPTS_ON_RACE):
        job = store.job(key, number)
        if job is None:
            raise NotFoundError(f"cluster {key} has no job {number}", field="job")
        if is_job_terminal(job.state):
            return JobReportAnswer(number, job.state, cancel=job.state != ClusterJobState.SUCCEEDED)
        node = plain(job.nodes).get(instance_id)
        if node is None:
            raise NotFoundError(f"{instance_id} does not run job {number}", field="instance_id")
        if PHASE_ORDER[phase] < PHASE_ORDER.get(str(node.get("phase")), 0):
            return JobReportAnswer(number, job.state, cancel=False)  # late: a later phase is recorded
        fields: dict[str, Any] = {"phase": phase}
        if exit_code is not None:
            fields["exit_code"] = int(exit_code)
        if node.get("phase") != phase and not store.update_job_node(job, instance_id, fields):
            continue  # the job moved under us: read again
        # Nodes reporting at once each read the others' old phases; deciding on a fresh read means the
        # last one to write sees every phase.
        fresh = store.job(key, number)
        if fresh is None or is_job_terminal(fresh.state):
            continue
        if _decide(wiring, store, key, fresh, instance_id, message):
            now = store.job(key, number) or fresh
            return JobReportAnswer(number, now.state, cancel=now.state in CANCELLING)
    latest = store.job(key, number)
    state = latest.state if latest is not None else ClusterJobState.FAILED.value
    return JobReportAnswer(
        number, state, cancel=is_job_terminal(state) and state != ClusterJobState.SUCCEEDED
    )


def _decide(
    wiring: Wiring, store: ClusterStore, key: str, job: ClusterJobModel, instance_id: str, message: str | None
) -> bool:
    """Move the job if its nodes' phases complete a step; True when nothing is left to do."""
    nodes = plain(job.nodes)
    phases = {iid: str(n.get("phase")) for iid, n in nodes.items()}
    failed = [(iid, p) for iid, p in phases.items() if p in ("failed", "setup_failed")]
    ended: ClusterJobState | None = None
    reason = None
    if failed:
        iid, phase = sorted(failed, key=lambda item: int(nodes[item[0]]["rank"]))[0]
        rank, code = int(nodes[iid]["rank"]), nodes[iid].get("exit_code")
        ended = ClusterJobState.FAILED_SETUP if phase == "setup_failed" else ClusterJobState.FAILED
        what = "setup" if phase == "setup_failed" else "run"
        reason = f"node rank {rank}: {what} exited with {code}" + (f": {message[:300]}" if message else "")
    elif all(p == "succeeded" for p in phases.values()):
        ended = ClusterJobState.SUCCEEDED
    if ended is not None:
        if ended == ClusterJobState.FAILED_SETUP and job.state != ClusterJobState.SETTING_UP:
            ended = ClusterJobState.FAILED
        done = end_job(store, key, job, ended, reason)
        if done:
            schedule_jobs(wiring, key)
            mark_idle_if_idle(wiring, key)
        return done or is_job_terminal((store.job(key, int(job.number)) or job).state)
    if job.state == ClusterJobState.SETTING_UP and all(
        p in ("running", "succeeded") for p in phases.values()
    ):
        cluster = store.get(key)
        if cluster is None:
            return True
        move = store.job_update(job, {"state": ClusterJobState.RUNNING.value})
        changes = {("active", str(int(job.number)), "state"): ClusterJobState.RUNNING.value}
        return store.write_cluster(cluster, changes, check="none", also=[move])
    return True
