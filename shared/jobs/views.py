"""Read side: one job with its plan, cluster and timeline; a user's jobs; a node's log text."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shared.errors import NotFoundError, UserError
from shared.jobs.blocks import blocks_of
from shared.jobs.costs import cost_with
from shared.jobs.job_groups import group_tasks_of
from shared.jobs.nodes import by_rank, node_phases
from shared.jobs.planning import plan_of
from shared.optimizer.cooling import Cooling, place_of
from shared.optimizer.plan import Block, Plan
from shared.states import is_terminal
from shared.store.job_store import Cooldowns, CooldownsReadOnce
from shared.store.models import ClusterModel, EventModel, JobModel
from shared.wiring import Wiring

MAX_LOG_CHUNKS_PER_READ = 50


def iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(float(epoch), UTC).isoformat()


@dataclass(frozen=True)
class JobView:
    """Shaped like the API's JobDetail (shared/api/models.py): `JobDetail.model_validate(view.as_dict())`."""

    job_id: str
    job_number: int | None  # the owner's number for it (shared/store/job_numbers.py)
    name: str | None
    state: str
    cloud: str | None
    region: str | None
    zone: str | None
    instance_type: str | None
    use_spot: bool | None
    recoveries: int
    attempt: int
    created_at: str | None
    updated_at: str | None
    reason: str | None = None
    cost: float = 0.0  # $ so far: finished attempts, plus the live cluster up to now
    source: str | None = None  # "cli" | "upload" | "schedule" (None: submitted before it was recorded)
    source_ref: str | None = None
    max_cost: float | None = None
    budget_stop: str | None = None
    plan: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)
    deadline: dict[str, Any] | None = None  # shared.jobs.deadlines.DeadlineView, for a deadline job
    tried: list[dict[str, Any]] = field(default_factory=list)  # the blocklist: places that failed, and why
    cooling: list[dict[str, Any]] = field(default_factory=list)  # spot places of the plan cooling down
    spot_probes: list[str] = field(
        default_factory=list
    )  # a deadline job's spot probing (shared.optimizer.probes)
    group: list[dict[str, Any]] | None = None  # a job group's tasks (shared.api.models.GroupTask)
    group_id: str | None = None  # the job group this job is a task of
    owner: str | None = None  # the user whose job it is

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReadLogs:
    """Which log to read: node `rank` of `job_id`, after the cursor `after` (a key an earlier read answered);
    `owner=None` skips the ownership check."""

    job_id: str
    owner: str | None
    rank: int = 0
    after: str | None = None


@dataclass(frozen=True)
class LogPage:
    job_id: str
    rank: int
    text: str
    cursor: str | None
    finished: bool


def job_view(
    job: JobModel,
    cluster: ClusterModel | None,
    events: list[EventModel] | None,
    cooling: list[Cooling] | None = None,
) -> JobView:
    plan = plan_of(job)
    candidate = None
    if plan is not None and int(job.task_index) < len(plan.tasks):
        candidates = plan.tasks[int(job.task_index)].candidates
        candidate = candidates[min(int(job.candidate_index), len(candidates) - 1)] if candidates else None
    where = cluster or candidate
    return JobView(
        job_id=job.job_id,
        job_number=None if job.job_number is None else int(job.job_number),
        name=job.name,
        state=job.state,
        cloud=where.cloud if where else None,
        region=where.region if where else None,
        zone=where.zone if where else None,
        instance_type=where.instance_type if where else None,
        use_spot=where.use_spot if where else None,
        recoveries=int(job.recoveries),
        attempt=int(job.attempt),
        created_at=iso(job.created_at),
        updated_at=iso(job.updated_at),
        reason=job.reason,
        cost=_cost_so_far(job, cluster),
        source=job.source,
        source_ref=job.source_ref,
        max_cost=None if job.max_cost is None else float(job.max_cost),
        budget_stop=job.budget_stop,
        plan=plan.as_dict() if plan else None,
        cluster=_cluster_dict(job, cluster) if cluster else None,
        timeline=_timeline(events, cluster if job.cluster_id == (cluster and cluster.cluster_id) else None),
        tried=[_tried_dict(b) for b in blocks_of(job)] if events is not None else [],
        cooling=[_cooling_dict(c) for c in cooling or []],
        deadline=_deadline_dict(job, cluster),
        owner=job.owner,
    )


def _deadline_dict(job: JobModel, cluster: ClusterModel | None) -> dict[str, Any] | None:
    if not job.deadline_at:
        return None
    from shared.jobs.deadlines import deadline_view  # (and the spot policy): for a deadline job only

    live = cluster if cluster is not None and job.cluster_id == cluster.cluster_id else None
    view = deadline_view(job, live)
    return None if view is None else view.as_dict()


def _timeline(events: list[EventModel] | None, cluster: ClusterModel | None) -> list[dict[str, Any]]:
    """The events, and the end of the job's own cluster (kept in its record, not written as an event)."""
    listed = [_event_dict(e) for e in events or []]
    if events is not None and cluster is not None and cluster.terminated_at is not None:
        message = f"cluster {cluster.cluster_id} terminated"
        if not any(e["kind"] == "teardown" and e["message"] == message for e in listed):
            ended = {"time": iso(cluster.terminated_at), "kind": "teardown", "state": None}
            listed.append({**ended, "message": message, "detail": {}})
            listed.sort(key=lambda e: e["time"] or "")
    return listed


def _tried_dict(block: Block) -> dict[str, Any]:
    place = "/".join(p for p in (block.cloud, block.region, block.zone) if p)
    return {"place": place, "instance_family": block.instance_family, "reason": block.reason}


def _cooling_dict(cooling: Cooling) -> dict[str, Any]:
    return {**cooling.as_dict(), "until": iso(cooling.until)}


def _plan_cooling(cooldowns: Cooldowns, plan: Plan | None) -> list[Cooling]:
    """The cooling places that cover a spot candidate of the plan (one read, only for spot plans)."""
    spot = [c for t in (plan.tasks if plan else []) for c in t.candidates if c.use_spot]
    if not spot:
        return []
    return [c for c in cooldowns.cooling() if any(c.covers(candidate) for candidate in spot)]


def _cost_so_far(job: JobModel, cluster: ClusterModel | None) -> float:
    live = cluster is not None and cluster.state == "UP" and job.cluster_id == cluster.cluster_id
    if live and not is_terminal(job.state):
        return cost_with(job, cluster)
    return float(job.cost or 0)


def _cluster_dict(job: JobModel, cluster: ClusterModel) -> dict[str, Any]:
    phases = node_phases(job, cluster)
    return {
        "cluster_id": cluster.cluster_id,
        "state": cluster.state,
        "provider": cluster.provider,
        "cloud": cluster.cloud,
        "region": cluster.region,
        "zone": cluster.zone,
        "instance_type": cluster.instance_type,
        "use_spot": cluster.use_spot,
        "nodes": [
            {
                "instance_id": iid,
                **{k: (float(v) if k == "heartbeat_at" else v) for k, v in node.items()},
                "phase": phases[iid],
            }
            for iid, node in by_rank(cluster)
        ],
    }


def _event_dict(event: EventModel) -> dict[str, Any]:
    detail = event.detail.as_dict() if event.detail is not None and hasattr(event.detail, "as_dict") else None
    return {
        "time": iso(float(event.at.split("#", 1)[0])),
        "kind": event.kind,
        "state": event.state,
        "message": event.message,
        "detail": json.loads(json.dumps(detail or {}, default=str)),
    }


def get_job(wiring: Wiring, job_id: str, *, owner: str | None) -> JobView:
    """NotFoundError for a job that does not exist or is not `owner`'s (None: anyone's)."""
    store = wiring.store
    job = store.get(job_id)
    if job is None or (owner is not None and job.owner != owner):
        raise NotFoundError(f"no job {job_id}", field="job_id")
    cooldowns = CooldownsReadOnce(wiring.cooldowns)
    cooling = [] if is_terminal(job.state) else _plan_cooling(cooldowns, plan_of(job))
    view = job_view(job, store.cluster(job.cluster_id), store.timeline(job_id), cooling)
    probes = spot_probe_lines(wiring, job, cooldowns=cooldowns)
    return with_group(wiring, job, replace(view, spot_probes=probes))


def spot_probe_lines(
    wiring: Wiring, job: JobModel, now: float | None = None, cooldowns: Cooldowns | None = None
) -> list[str]:
    """For a live job whose plan has spot (a deadline job's plan is priced for both markets): each spot zone
    of the plan with refusals in the last 10 minutes or a wait, and when it is probed next; the job's hourly
    limit when reached. One read."""
    plan = plan_of(job)
    if is_terminal(job.state) or plan is None or int(job.task_index) >= len(plan.tasks):
        return []
    candidates = plan.tasks[int(job.task_index)].candidates
    if not job.deadline_at and not any(c.use_spot for c in candidates):
        return []
    zones = list(dict.fromkeys(place_of(c.cloud, c.region, c.zone) for c in candidates))
    now = time.time() if now is None else now
    _, refusals = (cooldowns or wiring.cooldowns).evidence(now)
    from shared.jobs.deadlines import history_of, job_probes

    return job_probes(wiring.settings, job.job_id, refusals, now, history_of(job)).lines(zones)


def with_group(wiring: Wiring, job: JobModel, view: JobView) -> JobView:
    """The view with its job group's tasks (a group) or its group's id (a task of one)."""
    if job.group_tasks or job.group_id:
        return replace(view, group=group_tasks_of(wiring, job), group_id=job.group_id)
    return view


def read_logs(wiring: Wiring, command: ReadLogs) -> LogPage:
    """The text of a node's log chunks after the command's cursor."""
    job_id, owner, rank, after = command.job_id, command.owner, command.rank, command.after
    job = wiring.store.get(job_id)
    if job is None or (owner is not None and job.owner != owner):
        raise NotFoundError(f"no job {job_id}", field="job_id")
    if rank < 0:
        raise UserError("rank must be 0 or more", field="rank")
    prefix = f"runs/{job_id}/logs/{rank}/"
    if after is not None and not after.startswith(prefix):
        raise UserError("not a cursor of this job's log", field="after")
    keys = wiring.objects.list_keys(prefix, after=after)
    chunk_keys = keys[:MAX_LOG_CHUNKS_PER_READ]
    text = ""
    previous = attempt_of_log_key(after) if after else 0
    for key in chunk_keys:
        attempt = attempt_of_log_key(key)
        if attempt is not None and attempt != previous:
            text += ("" if text.endswith("\n") or not text else "\n") + attempt_banner(
                wiring, job_id, attempt
            )
            previous = attempt
        text += wiring.objects.get_text(key) or ""
    cursor = chunk_keys[-1] if chunk_keys else after
    finished = is_terminal(job.state) and len(keys) <= MAX_LOG_CHUNKS_PER_READ
    return LogPage(job_id, rank, text, cursor, finished)


def attempt_of_log_key(key: str) -> int | None:
    """The attempt of a log chunk key `runs/<job>/logs/<rank>/<attempt:03d>-<n>.log`."""
    head, dash, _ = key.rsplit("/", 1)[-1].partition("-")
    return int(head) if dash and head.isdigit() else None


def attempt_banner(wiring: Any, job_id: str, attempt: int) -> str:
    """The line that opens each attempt's part of a log after the first: where that attempt ran."""
    from shared.jobs.messages import cluster_id_for

    cluster = wiring.store.cluster(cluster_id_for(job_id, attempt))
    where = ""
    if cluster is not None:
        place = "/".join(p for p in (cluster.cloud, cluster.region, cluster.zone) if p)
        where = f": {place} {cluster.instance_type}" + (" (spot)" if cluster.use_spot else "")
    return f"----- attempt {attempt}{where} -----\n"
