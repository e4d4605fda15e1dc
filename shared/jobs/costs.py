"""What a job has cost so far: each attempt's cluster, from its launch to when the job let it go."""

from __future__ import annotations

import time

from shared.store.models import ClusterModel, JobModel


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
