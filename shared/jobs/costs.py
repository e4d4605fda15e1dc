"""What a job has cost so far: each attempt's cluster, from its launch to when the job let it go."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from shared.store.cost_rollups import AttemptFacts
from shared.store.models import ClusterModel, JobModel

if TYPE_CHECKING:
    from shared.wiring import Wiring


def cluster_cost(cluster: ClusterModel | None, until: float | None = None) -> float:
    """$ for the cluster's nodes from launch until `until` (or its termination, or now)."""
    if cluster is None or cluster.hourly_price is None:
        return 0.0
    end = until or cluster.terminated_at or time.time()
    hours = max(0.0, float(end) - float(cluster.launched_at)) / 3600
    return round(float(cluster.hourly_price) * int(cluster.num_nodes) * hours, 6)


def cost_with(job: JobModel, cluster: ClusterModel | None) -> float:
    """The job's recorded cost plus this cluster's, up to now: what to store when the job lets it go."""
    return round(float(job.cost or 0) + cluster_cost(cluster, time.time()), 6)


def end_cluster(wiring: Wiring, cluster: ClusterModel, owner: str | None = None) -> bool:
    """Mark the cluster record TERMINATED and add its attempt's cost to the rollups, in one write (False:
    it was not UP, nothing written). `owner`: the job's, when the caller has it."""
    return wiring.store.mark_cluster_terminated(cluster, attempt_facts(wiring, cluster, owner))


def attempt_facts(wiring: Wiring, cluster: ClusterModel, owner: str | None = None) -> AttemptFacts:
    """Whose the attempt is, the on-demand $/h of one node in its place, and whether it is its job's first
    cluster (a GetItem of the job without `owner`, a BatchGetItem of the earlier attempts' ids)."""
    if owner is None:
        job = wiring.store.get(cluster.job_id)
        owner = job.owner if job is not None else "unknown"
    earlier = [f"{cluster.job_id}-{n}" for n in range(int(cluster.attempt))]
    first = not earlier or not wiring.store.clusters_by_id(earlier)
    return AttemptFacts(owner=owner, on_demand_hourly=on_demand_price(wiring, cluster), first_of_job=first)


def on_demand_price(wiring: Wiring, cluster: ClusterModel) -> float | None:
    """The on-demand $/h of one node of the cluster's instance type in its place (None: unknown)."""
    if not cluster.use_spot:
        return None if cluster.hourly_price is None else float(cluster.hourly_price)
    prices = [
        o.price
        for o in wiring.catalog.by_instance_type(cluster.cloud, cluster.instance_type)
        if o.region == cluster.region and (cluster.zone is None or o.zone in (None, cluster.zone))
    ]
    return min(prices) if prices else None
