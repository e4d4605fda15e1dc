"""Job groups (`execution: parallel`): every task launched at once, each as a job of its own.

A group is one parent job (no cluster: `group_tasks` lists its members) and one member job per task
(`<group>-t<index>`, `group_id` naming the parent), each planned, launched, recovered and torn down by the
ordinary job steps on its own cluster. A member's node gets its config only when every live member has
its nodes (`group_peers`): then its environment names every task's addresses (node_env.job_group_env).

The group moves by one idempotent step (`step_group`, the provision queue's `group_step` message): a
member that starts running or ends asks for it (`tell_group`), the reconcile sweep runs it for every live
group (a lost message), and it sends itself delayed when an auxiliary task's termination delay is due.
What it decides is pure (`decide`), as SkyPilot's job-group controller does:
- with `primary_tasks`, once every primary task has ended the others are stopped, after
  `termination_delay` when every primary succeeded, at once when one did not;
- without, every task is primary: the group ends when all have ended;
- the group SUCCEEDED when every primary did and no auxiliary task failed on its own; FAILED when one
  failed (naming it); CANCELLED when a primary was cancelled and none failed.
A cancelled group cancels its members.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.jobs.costs import cost_with
from shared.jobs.messages import cluster_id_for, send_launch, send_optimize, send_teardown
from shared.jobs.outcomes import Outcome
from shared.states import HAS_NODES, JobState, is_failure, is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring

MAX_DELAY_SECONDS = 900  # SQS's longest DelaySeconds: a longer wait is a chain of delayed messages
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
STOPPED_BY_GROUP = "stopped by the job group"


def member_job_id(group_id: str, index: int) -> str:
    return f"{group_id}-t{index}"


def members_of(group: JobModel) -> list[str]:
    return list(json.loads(group.group_tasks)) if group.group_tasks else []


def duration_seconds(value: int | str) -> int:
    """`30`, `"30"`, `"30s"`, `"5m"`, `"1h"` ... in seconds (the loader has checked the form)."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+)([smhdw]?)", text)
    if match is None:
        raise ValueError(f"not a duration: {value!r}")
    return int(match.group(1)) * UNITS[match.group(2) or "s"]


def termination_delays(pipeline: Any) -> list[int]:
    """Each task's termination delay in seconds: its own entry of a mapping, else `default`, else 0."""
    delay = pipeline.termination_delay
    names = [task.name for task in pipeline.tasks]
    if delay is None:
        return [0] * len(names)
    if not isinstance(delay, dict):
        return [duration_seconds(delay)] * len(names)
    default = duration_seconds(delay["default"]) if "default" in delay else 0
    return [duration_seconds(delay[name]) if name in delay else default for name in names]


def primary_indices(pipeline: Any) -> frozenset[int]:
    """The primary tasks' indices: those `primary_tasks` names, or every task when it names none."""
    names = pipeline.primary_tasks or [task.name for task in pipeline.tasks]
    return frozenset(i for i, task in enumerate(pipeline.tasks) if task.name in names)


@dataclass(frozen=True)
class Member:
    """What the decision reads of one member job."""

    name: str
    state: JobState
    reason: str | None = None

    @property
    def stopped_by_group(self) -> bool:
        return self.state == JobState.CANCELLED and (self.reason or "").startswith(STOPPED_BY_GROUP)


@dataclass(frozen=True)
class Verdict:
    all_running: bool = False  # every member has reached RUNNING (or ended)
    primaries_done: bool = False
    stop_now: list[int] = field(default_factory=list)  # auxiliary members to stop now
    wake_in: float | None = None  # seconds until the next auxiliary stop is due
    final: JobState | None = None  # the group's end, once every member has ended (stops counted)
    reason: str | None = None


def decide(
    members: Sequence[Member],
    primaries: frozenset[int],
    delays: Sequence[int],
    primaries_done_at: float | None,
    now: float,
) -> Verdict:
    """The group's next step from its members' states: pure, so every duplicate decides the same."""
    ended = [is_terminal(m.state) for m in members]
    started = all(e or m.state == JobState.RUNNING for e, m in zip(ended, members, strict=True))
    if not all(ended[i] for i in primaries):
        return Verdict(all_running=started)
    primaries_ok = all(members[i].state == JobState.SUCCEEDED for i in primaries)
    done_at = now if primaries_done_at is None else primaries_done_at
    stop_now: list[int] = []
    waits: list[float] = []
    for index in range(len(members)):
        if ended[index]:
            continue
        due = done_at + (delays[index] if primaries_ok else 0)
        if now >= due:
            stop_now.append(index)
        else:
            waits.append(due - now)
    if waits:
        return Verdict(all_running=started, primaries_done=True, stop_now=stop_now, wake_in=min(waits))
    final, reason = _outcome(members, primaries)
    return Verdict(all_running=started, primaries_done=True, stop_now=stop_now, final=final, reason=reason)


def _outcome(members: Sequence[Member], primaries: frozenset[int]) -> tuple[JobState, str]:
    failed = [m.name for i, m in enumerate(members) if i in primaries and is_failure(m.state)]
    if failed:
        return JobState.FAILED, f"task {', '.join(failed)} of the job group failed"
    cancelled = [m.name for i, m in enumerate(members) if i in primaries and m.state == JobState.CANCELLED]
    if cancelled:
        return JobState.CANCELLED, f"task {', '.join(cancelled)} of the job group was cancelled"
    aux_failed = [m.name for i, m in enumerate(members) if i not in primaries and is_failure(m.state)]
    if aux_failed:
        return JobState.FAILED, f"auxiliary task {', '.join(aux_failed)} of the job group failed"
    if len(primaries) == len(members):
        return JobState.SUCCEEDED, "every task of the job group succeeded"
    return JobState.SUCCEEDED, "the job group's primary tasks succeeded"


# -- submit --------------------------------------------------------------------------------------------


def submit_group(
    wiring: Wiring, group: JobModel, pipeline: Any, filename: str, plan_at_submit: Callable[..., str]
) -> str:
    """Record the members (each planned, its launch asked for) and then the group; answers the group's
    state. A second submit with the same group id (an upload delivered twice) finds every record and
    sends nothing; one that died between the members and the group records the group and sends again
    (a launch message twice is harmless: provisioning takes it once). `plan_at_submit` plans a member
    as submission plans a job (shared.jobs.submission)."""
    from shared.jobs.task_records import store_pipeline
    from shared.jobs.tokens import agent_token, token_hash
    from shared.task.unsupported_fields import pipeline_notes

    existing = wiring.store.get(group.job_id)
    if existing is not None:
        return str(existing.state)
    ids = [member_job_id(group.job_id, i) for i in range(len(pipeline.tasks))]
    launches: list[tuple[str, bool]] = []
    for index, (member_id, task) in enumerate(zip(ids, pipeline.tasks, strict=True)):
        member = wiring.store.new_job(
            job_id=member_id,
            owner=group.owner,
            name=task.name,
            state=JobState.PENDING.value,
            version=0,
            attempt=0,
            minimize=group.minimize,
            clouds=group.clouds,
            workdir_key=group.workdir_key,
            file_mounts=group.file_mounts,
            token_hash=token_hash(agent_token(wiring.settings, member_id, 0)),
            source=group.source,
            source_ref=group.source_ref,
            group_id=group.job_id,
            group_index=index,
        )
        one_task = pipeline.model_copy(
            update={"tasks": [task], "execution": "serial", "primary_tasks": None, "termination_delay": None}
        )
        store_pipeline(wiring, member, one_task)
        message = f"task {task.name} of job group {pipeline.name} ({group.job_id}); "
        message += plan_at_submit(wiring, member, filename)
        recorded = member if wiring.store.create(member, message) else wiring.store.get(member_id)
        if recorded is not None and JobState(recorded.state) in (JobState.PLANNED, JobState.PENDING):
            launches.append((member_id, recorded.state == JobState.PLANNED))
    without_secrets = [task.model_copy(update={"secrets": {}}) for task in pipeline.tasks]
    bare = pipeline.model_copy(update={"tasks": without_secrets})
    store_pipeline(wiring, group, bare)
    group.state = JobState.PROVISIONING.value
    group.group_tasks = json.dumps(ids)
    primaries = ", ".join(pipeline.tasks[i].name for i in sorted(primary_indices(pipeline)))
    detail: dict[str, Any] = {"tasks": [t.name for t in pipeline.tasks], "primary_tasks": primaries}
    notes = pipeline_notes(pipeline)  # fields read but not acted on: in the timeline, so `status` says them
    if notes:
        detail["notes"] = notes
    text = f"submitted {filename}: job group {pipeline.name}, {len(ids)} tasks launched together"
    if not wiring.store.create(group, text, detail):
        existing = wiring.store.get(group.job_id)
        return str(existing.state) if existing else str(group.state)
    for member_id, planned in launches:
        (send_launch if planned else send_optimize)(wiring, member_id, 0)
    return str(group.state)


# -- the step ------------------------------------------------------------------------------------------


def tell_group(wiring: Wiring, job: JobModel) -> None:
    """A member moved (started running, or ended): ask for the group's step."""
    if job.group_id:
        send_group_step(wiring, str(job.group_id))


def send_group_step(wiring: Wiring, group_id: str, delay_seconds: int = 0) -> None:
    body = {"job_id": group_id, "attempt": 0, "action": "group_step"}
    wiring.queues.provision.send(body, delay_seconds=max(0, min(MAX_DELAY_SECONDS, delay_seconds)))


def step_group(wiring: Wiring, group_id: str, now: float | None = None) -> Outcome:
    """Move the group as its members stand. Idempotent: every write is conditional, and a duplicate or
    late message decides from fresh reads what the first one did (and changes nothing)."""
    now = time.time() if now is None else now
    group = wiring.store.get(group_id)
    if group is None or not group.group_tasks:
        return Outcome.UNKNOWN_JOB
    members = [wiring.store.get(member_id) for member_id in members_of(group)]
    if is_terminal(group.state):
        stopped = [m for m in members if m is not None and not is_terminal(m.state)]
        for member in stopped:
            stop_member(wiring, member, f"{STOPPED_BY_GROUP}: the group is {group.state}")
        return Outcome.DONE if stopped else Outcome.ALREADY_DONE
    if any(m is None for m in members):
        return Outcome.ALREADY_DONE  # a submit still recording its members: their own moves ask again
    recorded = [m for m in members if m is not None]
    pipeline = _group_pipeline(wiring, group)
    primaries, delays = primary_indices(pipeline), termination_delays(pipeline)
    verdict = decide([_member(m) for m in recorded], primaries, delays, group.group_done_at, now)
    changed = False
    if verdict.primaries_done and group.group_done_at is None:
        names = ", ".join(recorded[i].name or "" for i in sorted(primaries))
        note = f"primary tasks ended ({names}); stopping the others"
        if not wiring.store.save_progress(group, {"group_done_at": now}, note):
            return Outcome.ALREADY_DONE  # another step moved the group first; it (or the next) goes on
        changed = True
    for index in verdict.stop_now:
        delay = delays[index] if all(recorded[i].state == JobState.SUCCEEDED for i in primaries) else 0
        why = f"{STOPPED_BY_GROUP}: its primary tasks ended (termination_delay {delay} s)"
        changed = stop_member(wiring, recorded[index], why) or changed
    if verdict.wake_in is not None:
        send_group_step(wiring, group_id, delay_seconds=int(verdict.wake_in) + 1)
    if verdict.stop_now:  # decide the end from what the stops left
        fresh = [wiring.store.get(m.job_id) or m for m in recorded]
        verdict = decide([_member(m) for m in fresh], primaries, delays, group.group_done_at, now)
        recorded = fresh
    if verdict.final is not None:
        cost = sum(float(m.cost or 0) for m in recorded)
        changes = {"reason": verdict.reason, "cost": cost}
        moved = wiring.store.move(group, verdict.final, verdict.reason or "", changes=changes)
        return Outcome.DONE if moved or changed else Outcome.ALREADY_DONE
    if verdict.all_running and JobState(group.state) == JobState.PROVISIONING:
        moved = wiring.store.move(group, JobState.RUNNING, "every task of the job group is running")
        changed = moved or changed
    return Outcome.DONE if changed else Outcome.ALREADY_DONE


def stop_member(wiring: Wiring, member: JobModel, reason: str) -> bool:
    """CANCELLED with `reason`, and its cluster torn down; False when it had already moved on."""
    if is_terminal(member.state):
        return False
    cluster_id = member.cluster_id or cluster_id_for(member.job_id, int(member.attempt))
    cost = cost_with(member, wiring.store.cluster(member.cluster_id))
    if not wiring.store.move(member, JobState.CANCELLED, reason, changes={"reason": reason, "cost": cost}):
        return False
    send_teardown(wiring, member.job_id, int(member.attempt), cluster_id)
    return True


def _member(job: JobModel) -> Member:
    return Member(name=job.name or job.job_id, state=JobState(job.state), reason=job.reason)


def _group_pipeline(wiring: Wiring, group: JobModel) -> Any:
    from shared.jobs.task_records import load_pipeline_of

    return load_pipeline_of(wiring, group)


# -- the nodes' view -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """One task of the group as its nodes see the others: its name and its nodes' addresses by rank."""

    name: str
    ips: list[str]


@dataclass(frozen=True)
class GroupView:
    name: str  # the group's name (SKYPILOT_JOBGROUP_NAME)
    task_names: list[str]
    submitted_at: float
    job_id: str
    owner: str
    peers: list[Peer]


def group_view(wiring: Wiring, member: JobModel) -> GroupView | None:
    """The group as a member's node sees it, or None while a live member has no nodes yet (the barrier:
    SkyPilot starts a group's tasks once every task's cluster is up). A member that has ended is listed
    with the nodes it had, or none."""
    from shared.jobs.nodes import by_rank

    group = wiring.store.get(str(member.group_id))
    if group is None:
        return None
    pipeline = _group_pipeline(wiring, group)
    peers: list[Peer] = []
    for index, member_id in enumerate(members_of(group)):
        job = member if member_id == member.job_id else wiring.store.get(member_id)
        name = str(pipeline.tasks[index].name)
        if job is None:
            return None
        cluster = wiring.store.cluster(job.cluster_id) if job.cluster_id else None
        nodes = by_rank(cluster) if cluster is not None else []
        ready = cluster is not None and len(nodes) >= int(cluster.num_nodes)
        if not is_terminal(job.state) and not (JobState(job.state) in HAS_NODES and ready):
            return None
        peers.append(Peer(name=name, ips=[str(node["ip"]) for _, node in nodes]))
    return GroupView(
        name=str(pipeline.name),
        task_names=[str(t.name) for t in pipeline.tasks],
        submitted_at=float(group.created_at),
        job_id=group.job_id,
        owner=group.owner,
        peers=peers,
    )


# -- the read side -------------------------------------------------------------------------------------


def group_tasks_of(wiring: Wiring, group: JobModel) -> list[dict[str, Any]] | None:
    """A job group's tasks as `status` shows them (shared.api.models.GroupTask); None for other jobs."""
    if not group.group_tasks:
        return None
    primaries = primary_indices(_group_pipeline(wiring, group))
    tasks: list[dict[str, Any]] = []
    for index, member_id in enumerate(members_of(group)):
        member = wiring.store.get(member_id)
        if member is None:
            continue
        cluster = wiring.store.cluster(member.cluster_id) if member.cluster_id else None
        live = cluster is not None and not is_terminal(member.state)
        tasks.append(
            {
                "task": member.name or member_id,
                "job_id": member_id,
                "state": member.state,
                "primary": index in primaries,
                "reason": member.reason,
                "cloud": cluster.cloud if cluster else None,
                "region": cluster.region if cluster else None,
                "instance_type": cluster.instance_type if cluster else None,
                "cost": cost_with(member, cluster) if live else float(member.cost or 0),
            }
        )
    return tasks
