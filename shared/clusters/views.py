"""Read side of named clusters: a user's clusters (`skyless status`), one cluster with its nodes and
timeline, its job queue (`skyless queue NAME`), a job's log (`skyless logs NAME JOB`). Each view is a plain
dict shaped like its API model (shared/api/cluster_models.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.clusters.facts import active_of, autostop_text, cost_so_far, nodes_by_rank
from shared.clusters.job_queue import log_prefix
from shared.clusters.operations import find_cluster
from shared.clusters.states import is_job_terminal
from shared.config import Settings
from shared.errors import NotFoundError, UserError
from shared.store.cluster_records import ClusterJobModel, ClusterStore, NamedClusterModel
from shared.wiring import wiring_for

MAX_LOG_CHUNKS_PER_READ = 50


def iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(float(epoch), UTC).isoformat()


def cluster_view(
    cluster: NamedClusterModel, *, detail: bool = False, store: ClusterStore | None = None
) -> dict[str, Any]:
    view: dict[str, Any] = {
        "name": cluster.name,
        "cluster_id": cluster.key,
        "state": cluster.state,
        "reason": cluster.reason,
        "cloud": cluster.cloud,
        "region": cluster.region,
        "zone": cluster.zone,
        "instance_type": cluster.instance_type,
        "use_spot": bool(cluster.use_spot),
        "num_nodes": int(cluster.num_nodes or 1),
        "accelerator": cluster.accelerator,
        "accelerator_count": float(cluster.accelerator_count or 0),
        "hourly_price": None if cluster.hourly_price is None else float(cluster.hourly_price),
        "autostop_minutes": int(cluster.autostop_minutes),
        "autostop_down": bool(cluster.autostop_down),
        "autostop": autostop_text(cluster),
        "idle_since": iso(cluster.idle_since),
        "cost": cost_so_far(cluster),
        "active_jobs": len(active_of(cluster)),
        "created_at": iso(cluster.created_at),
        "up_since": iso(cluster.up_since),
        "provider": cluster.provider,
        "provider_cluster": cluster.provider_cluster,
    }
    if detail:
        view["nodes"] = [
            {
                "instance_id": iid,
                "rank": int(node["rank"]),
                "ip": node.get("ip"),
                "public_ip": node.get("public_ip"),
                "sessions": int(node.get("sessions") or 0),
                "ready": bool(node.get("ready")),
                "heartbeat_at": iso(node.get("heartbeat_at")),
            }
            for iid, node in nodes_by_rank(cluster)
        ]
        view["ports"] = open_ports(store, cluster) if store is not None else []
        events = store.timeline(cluster.key) if store is not None else []
        view["timeline"] = [
            {
                "time": iso(float(e.at.split("#", 1)[0])),
                "kind": e.kind,
                "state": e.state,
                "message": e.message,
            }
            for e in events
        ]
    return view


def open_ports(store: ClusterStore, cluster: NamedClusterModel) -> list[str]:
    """The ports the cluster's nodes were launched with open (its launch task's `resources.ports`, as
    provisioning opens them): "8080", "9000-9010". A task launched later on the cluster opens none."""
    import json

    from shared.task.spec import Pipeline

    plan_item = store.plan_item(cluster.key)
    if plan_item is None:
        return []
    ports = Pipeline.model_validate(json.loads(plan_item.task)).tasks[0].resources.ports
    listed = [] if ports is None else ports if isinstance(ports, list) else [ports]
    return [str(p) for p in listed]


def job_view(cluster: NamedClusterModel, job: ClusterJobModel) -> dict[str, Any]:
    end = job.ended_at
    started = job.started_at
    duration = None
    if started is not None:
        duration = round(float(end if end is not None else datetime.now(UTC).timestamp()) - float(started), 3)
    return {
        "cluster": cluster.name,
        "job": int(job.number),
        "name": job.name,
        "state": job.state,
        "command": job.command,
        "with_setup": bool(job.with_setup),
        "num_nodes": int(job.num_nodes),
        "gpus": float(job.gpus or 0),
        "submitted_at": iso(job.submitted_at),
        "started_at": iso(started),
        "ended_at": iso(end),
        "duration_seconds": duration,
        "reason": job.reason,
    }


def list_clusters(settings: Settings, *, owner: str | None) -> list[dict[str, Any]]:
    """The owner's clusters that are not TERMINATED, by name, each with its owner; owner None: every
    user's (the caller has checked that an admin asks), from the live index, by owner and name."""
    store = ClusterStore(settings)
    clusters = store.clusters_of(owner) if owner is not None else store.live_clusters()
    shown = [{**cluster_view(c), "owner": c.owner} for c in clusters if c.state != "TERMINATED"]
    return shown if owner is not None else sorted(shown, key=lambda c: (c["owner"], c["name"]))


def named_cluster_costs(settings: Settings, *, owner: str | None) -> list[dict[str, Any]]:
    """Named clusters not torn down, each with its cost so far and its owner: `owner`'s, or everyone's
    (owner None: the caller has checked that an admin asks; that reads every live cluster)."""
    return list_clusters(settings, owner=owner)


def get_cluster(settings: Settings, *, owner: str, name: str) -> dict[str, Any]:
    store = ClusterStore(settings)
    return cluster_view(find_cluster(settings, owner, name), detail=True, store=store)


def cluster_queue(settings: Settings, *, owner: str, name: str, limit: int = 200) -> list[dict[str, Any]]:
    """The cluster's jobs, newest first (as `sky queue`)."""
    store = ClusterStore(settings)
    cluster = find_cluster(settings, owner, name)
    return [job_view(cluster, job) for job in store.jobs_of(cluster.key, limit=limit, newest_first=True)]


def get_cluster_job(settings: Settings, *, owner: str, name: str, number: int) -> dict[str, Any]:
    store = ClusterStore(settings)
    cluster = find_cluster(settings, owner, name)
    job = store.job(cluster.key, number)
    if job is None:
        raise NotFoundError(f"cluster {name} has no job {number}", field="job")
    return job_view(cluster, job)


def latest_job_number(settings: Settings, *, owner: str, name: str) -> int:
    store = ClusterStore(settings)
    cluster = find_cluster(settings, owner, name)
    newest = store.jobs_of(cluster.key, limit=1, newest_first=True)
    if not newest:
        raise NotFoundError(f"cluster {name} has run no job yet", field="job")
    return int(newest[0].number)


def read_cluster_logs(
    settings: Settings, *, owner: str, name: str, number: int, rank: int = 0, after: str | None = None
) -> dict[str, Any]:
    """A job's log text on one node after the cursor `after` (a key an earlier read answered)."""
    wiring = wiring_for(settings)
    store = ClusterStore(settings)
    cluster = find_cluster(settings, owner, name)
    job = store.job(cluster.key, number)
    if job is None:
        raise NotFoundError(f"cluster {name} has no job {number}", field="job")
    if rank < 0:
        raise UserError("rank must be 0 or more", field="rank")
    prefix = log_prefix(cluster.key, number, rank)
    if after is not None and not after.startswith(prefix):
        raise UserError("not a cursor of this job's log", field="after")
    keys = wiring.objects.list_keys(prefix, after=after)
    chunk = keys[:MAX_LOG_CHUNKS_PER_READ]
    text = "".join(wiring.objects.get_text(k) or "" for k in chunk)
    cursor = chunk[-1] if chunk else after
    finished = is_job_terminal(job.state) and len(keys) <= MAX_LOG_CHUNKS_PER_READ
    return {
        "cluster": name,
        "job": number,
        "rank": rank,
        "state": job.state,
        "num_nodes": int(job.num_nodes),
        "text": text,
        "cursor": cursor,
        "finished": finished,
    }
